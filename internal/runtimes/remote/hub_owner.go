package remote

import (
	"fmt"
	"strings"
	"time"
)

// One agent serves a linked runtime. The first agent to connect with the
// runtime's token keeps it while it answers the server's pings; another
// agent connecting on the same token meanwhile is refused (409 Conflict,
// with a message naming the first one) and its attempt is kept for
// drover runtimes. The same agent connecting again (the same process:
// InstanceHeader) replaces its own older connection, and an agent that did
// not answer for TakeoverAfter loses the runtime to the next one that
// connects. So two agents on one token no longer take turns, each
// replacing the other, and one dead agent does not keep its runtime.

// RefusalsShownFor is how long a refused attempt is reported (Presence).
const RefusalsShownFor = 15 * time.Minute

// Presence is what this server holds of the agent of a linked runtime: the
// connection it serves, if any, and the last attempt of another agent
// refused because of it.
type Presence struct {
	// Connected says an agent of the runtime is connected to this server,
	// from RemoteAddr since Since.
	Connected  bool
	RemoteAddr string
	Since      time.Time
	Version    string
	Host       string
	// Refused is the last refused attempt (At zero: none in the last
	// RefusalsShownFor).
	Refused Attempt
}

// Attempt is a connection attempt refused because another agent served the
// runtime.
type Attempt struct {
	At         time.Time
	RemoteAddr string
	// Version is the refused agent's drover version, as it said.
	Version string
	// Count is how many attempts were refused since the first one after a
	// quiet RefusalsShownFor (an agent retrying counts each retry).
	Count int
	// Holder is the address of the agent that served the runtime then.
	Holder string
}

// Presence returns what this server holds of the agent of runtime name.
func (h *Hub) Presence(name string) Presence {
	h.mu.Lock()
	s, a := h.sessions[name], h.refused[name]
	h.mu.Unlock()
	var p Presence
	if s != nil && !s.ended() {
		p = Presence{Connected: true, RemoteAddr: s.remote, Since: s.opened, Version: s.hello.Version, Host: s.hello.Host}
	}
	if !a.At.IsZero() && h.cfg.Now().Sub(a.At) < RefusalsShownFor {
		p.Refused = a
	}
	return p
}

// holder returns the session of the agent that serves runtime name here
// and keeps it from an agent connecting as instance, or nil.
func (h *Hub) holder(name, instance string) *session {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.sessions[name]; s != nil && h.serves(s, instance) {
		return s
	}
	return nil
}

// serves reports whether s keeps its runtime from an agent connecting as
// instance: s is open, its agent answered a ping within TakeoverAfter,
// and it is another agent (or either cannot tell: an older agent sends no
// instance).
func (h *Hub) serves(s *session, instance string) bool {
	if s.ended() || h.cfg.Now().Sub(s.lastBeat()) > h.cfg.TakeoverAfter {
		return false
	}
	return instance == "" || s.instance != instance
}

// refuse records and logs the attempt of an agent from remote, refused
// because holder serves runtime name.
func (h *Hub) refuse(name, remote, version string, holder *session) {
	now := h.cfg.Now()
	h.mu.Lock()
	a := h.refused[name]
	if now.Sub(a.At) >= RefusalsShownFor {
		a.Count = 0
	}
	a = Attempt{At: now, RemoteAddr: remote, Version: version, Count: a.Count + 1, Holder: holder.remote}
	h.refused[name] = a
	h.mu.Unlock()
	h.log.Warn("agent refused: another agent serves its runtime", "runtime", name, "remote_addr", remote, "version", version,
		"holder_addr", holder.remote, "holder_since", holder.opened, "attempts", a.Count)
}

// busy is what an agent refused because of s is told.
func (s *session) busy() string {
	var about []string
	if v := s.hello.Version; v != "" {
		about = append(about, "version "+v)
	}
	if h := s.hello.Host; h != "" {
		about = append(about, "host "+h)
	}
	detail := ""
	if len(about) > 0 {
		detail = " (" + strings.Join(about, ", ") + ")"
	}
	return fmt.Sprintf("runtime %s is already served by an agent connected from %s since %s%s; stop that agent first, "+
		"or rotate the token (drover runtimes rotate-token %s) and give the new one to this agent only",
		s.name, s.remote, s.opened.UTC().Format(time.RFC3339), detail, s.name)
}

// agentVersion is the version an agent's User-Agent names
// (drover-agent/VERSION), bounded for the log.
func agentVersion(userAgent string) string {
	v, ok := strings.CutPrefix(userAgent, "drover-agent/")
	if !ok {
		return ""
	}
	if len(v) > 64 {
		v = v[:64]
	}
	return v
}
