package auth

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrForeignListener is wrapped by the error of CheckListenerOwner when
// another OS user listens on the server's address.
var ErrForeignListener = errors.New("refusing to send your drover token")

// procNet is where Linux lists the sockets of the network namespace.
const procNet = "/proc/net"

// tcpListen is the state of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// CheckListenerOwner checks, before the CLI sends a token it found by itself
// (FindServerToken) to serverURL, that the process listening there belongs
// to the current OS user (or to root, who can read the token anyway). It
// stops another local user who binds the port while the user's server is
// stopped from collecting the token. It reads /proc/net/tcp and tcp6, so it
// checks only on Linux; elsewhere, and for a host that is not localhost or
// an IP address, or an address nothing on this host listens on (another
// machine), it returns nil. A listener of another user is an error wrapping
// ErrForeignListener.
func CheckListenerOwner(serverURL string) error {
	return checkListenerOwner(serverURL, procNet, os.Getuid())
}

func checkListenerOwner(serverURL, dir string, uid int) error {
	u, err := url.Parse(serverURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("server URL %q: want http://HOST:PORT", serverURL)
	}
	host, port := u.Hostname(), urlPort(u)
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Errorf("server URL %q: bad port %q", serverURL, port)
	}
	var addrs []netip.Addr
	if strings.EqualFold(host, "localhost") {
		addrs = []netip.Addr{netip.IPv6Loopback(), netip.AddrFrom4([4]byte{127, 0, 0, 1})}
	} else if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a.WithZone("").Unmap()}
	} else {
		return nil // a name: not a local server's recorded address
	}
	var socks []listener
	found := false
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // not Linux, or no IPv6
		}
		if err != nil {
			return fmt.Errorf("check who listens on %s: %w; pass --token to override", u.Host, err)
		}
		found = true
		s, err := parseProcNetTCP(f)
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("check who listens on %s: %s/%s: %w; pass --token to override", u.Host, dir, name, err)
		}
		socks = append(socks, s...)
	}
	if !found {
		return nil
	}
	for _, a := range addrs {
		for _, l := range listenersFor(socks, a, uint16(p)) {
			if l.uid != uid && l.uid != 0 {
				return fmt.Errorf("the process listening on %s belongs to another user (uid %d): %w; pass --token to override",
					netip.AddrPortFrom(a, uint16(p)), l.uid, ErrForeignListener)
			}
		}
	}
	return nil
}

// urlPort is u's port, or its scheme's default.
func urlPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// listener is a listening TCP socket of /proc/net/tcp or tcp6.
type listener struct {
	addr netip.AddrPort // IPv4-mapped addresses unmapped
	uid  int
}

// listenersFor are the sockets a connection to a:port reaches, as Linux
// chooses: those bound to a itself if any, else the wildcard ones (0.0.0.0
// for IPv4, :: for both families).
func listenersFor(socks []listener, a netip.Addr, port uint16) []listener {
	var exact, wild []listener
	for _, l := range socks {
		if l.addr.Port() != port {
			continue
		}
		la := l.addr.Addr()
		switch {
		case la == a:
			exact = append(exact, l)
		case la.IsUnspecified() && (la.Is4() == a.Is4() || la.Is6()):
			wild = append(wild, l)
		}
	}
	if len(exact) > 0 {
		return exact
	}
	return wild
}

// parseProcNetTCP reads the listening sockets of /proc/net/tcp or tcp6:
// "sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt
// uid ...", addresses as hex words in the kernel's byte order (the host's).
func parseProcNetTCP(r io.Reader) ([]listener, error) {
	var out []listener
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	first := true
	for sc.Scan() {
		if first {
			first = false // the header
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		if f[3] != tcpListen {
			continue
		}
		ap, err := parseHexAddrPort(f[1])
		if err != nil {
			return nil, err
		}
		uid, err := strconv.Atoi(f[7])
		if err != nil {
			return nil, fmt.Errorf("bad uid %q", f[7])
		}
		out = append(out, listener{addr: ap, uid: uid})
	}
	return out, sc.Err()
}

// parseHexAddrPort reads "0100007F:1CFC" (127.0.0.1:7420 on a little-endian
// host) or its 32-digit IPv6 form.
func parseHexAddrPort(s string) (netip.AddrPort, error) {
	hexAddr, hexPort, ok := strings.Cut(s, ":")
	port, perr := strconv.ParseUint(hexPort, 16, 16)
	raw, herr := hex.DecodeString(hexAddr)
	if !ok || perr != nil || herr != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("bad local address %q", s)
	}
	// Each 32-bit word was printed as a number in host byte order.
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	a, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(a.Unmap(), uint16(port)), nil
}
