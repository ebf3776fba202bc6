package auth

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Hosts is the set of Host header values that name this server: the address
// it listens on, the loopback names for a loopback (or wildcard) listen, and
// configured public names. Anything else is a request meant for another
// name, as in DNS rebinding, and is refused.
type Hosts struct {
	port  string
	names map[string]bool
	// anyIP: the server listens on every address (0.0.0.0 or ::), so any IP
	// literal with its port names it. A literal cannot be rebound.
	anyIP bool
}

// NewHosts builds the set for a server bound to addr (port 0 already
// resolved). names are further names the server answers to: "host" or
// "host:port" (without a port: the bare name, as behind a proxy on a default
// port, and the name with the listen port; port 0 means the listen port).
func NewHosts(addr net.Addr, names ...string) (Hosts, error) {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return Hosts{}, fmt.Errorf("listen address %s: %w", addr, err)
	}
	h := Hosts{port: port, names: map[string]bool{}}
	h.add(host, port)
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		if ip.IsUnspecified() {
			h.anyIP = true
		}
		if ip.IsLoopback() || ip.IsUnspecified() {
			for _, n := range []string{"localhost", "127.0.0.1", "::1"} {
				h.add(n, port)
			}
		}
	}
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, "/ ") {
			return Hosts{}, fmt.Errorf("public name %q: give a host name, optionally with :port, not a URL", n)
		}
		nh, np, err := net.SplitHostPort(n)
		switch {
		case err != nil: // no port
			h.names[strings.ToLower(n)] = true
			h.add(n, port)
		case np == "0":
			h.add(nh, port)
		default:
			h.add(nh, np)
		}
	}
	return h, nil
}

func (h Hosts) add(host, port string) {
	h.names[strings.ToLower(net.JoinHostPort(strings.Trim(host, "[]"), port))] = true
}

// Allowed reports whether a Host header value (host or host:port) names
// this server.
func (h Hosts) Allowed(hostport string) bool {
	hostport = strings.ToLower(hostport)
	if h.names[hostport] {
		return true
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		// No port: the default port of plain HTTP.
		host, port = strings.Trim(hostport, "[]"), "80"
		if h.names[net.JoinHostPort(host, port)] {
			return true
		}
	}
	if h.anyIP && port == h.port {
		if _, err := netip.ParseAddr(host); err == nil {
			return true
		}
	}
	return false
}

// Names returns the allowed host:port names, for messages.
func (h Hosts) Names() []string {
	out := make([]string, 0, len(h.names))
	for n := range h.names {
		out = append(out, n)
	}
	return out
}

// IsLoopback reports whether addr is a loopback address; a server bound
// anywhere else is reachable from other machines.
func IsLoopback(addr net.Addr) bool {
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
