package remote

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	"github.com/drover-dev/drover/internal/runtimes"
)

// Limits of what the server reads from an agent. An agent holds only a join
// token, which sits in a Kubernetes Secret or on a host the server does not
// control: it is trusted less than the server, so every byte it sends is
// read through one of these bounds, each sized for what its message carries
// legitimately. An agent that passes one is disconnected (see
// session.exceeded): a conforming agent never does.
const (
	// helloLimit bounds the hello: a version, a mode and a host name.
	helloLimit = 64 << 10
	// ackLimit bounds the answer of a call that carries none (/peers
	// answers {}).
	ackLimit = 4 << 10
	// discoverLimit bounds /discover: a cluster's version and its API group
	// versions, a few hundred short strings even with many CRDs.
	discoverLimit = 1 << 20
	// outputLimit bounds the answers that may carry a runtime's own output:
	// /fetch (objects and their messages), /apply (one change per object),
	// /info and /check. A custom runtime reads up to 1 MiB of a command's
	// stdout (custom.maxOutput) and may pass all of it on; JSON may write
	// each byte of it as \u00XX (6 bytes): 8 MiB holds that with room.
	outputLimit = 8 << 20
	// errorLimit bounds the body of a failed call: an error message, which
	// quotes at most excerpts of a command's output.
	errorLimit = 1 << 20
	// watchLineLimit bounds one line of a watch's stream: an instance key
	// (three names). The stream itself lasts as long as the session.
	watchLineLimit = 64 << 10
	// runLimit bounds a run an agent hands back (POST /runs): the runtimes
	// keep 64 KiB of each of stdout and stderr (custom.maxRecorded,
	// terraform's outputLimit), at most 768 KiB once escaped, plus the
	// command.
	runLimit = 1 << 20
	// headerLimit bounds the header of each answer and of each request the
	// agent sends: a few short fields.
	headerLimit = 64 << 10
	// agentStreamsLimit is how many streams an agent may have open towards
	// the server at once (runs being handed back); more wait to be
	// accepted. yamux buffers up to a window (256 KiB) per stream: without
	// a bound, an agent opening streams without end would exhaust memory.
	agentStreamsLimit = 32
)

// answerLimit is how large the answer of the call to path may be.
func answerLimit(path string) int64 {
	switch path {
	case pathHello:
		return helloLimit
	case pathDiscover:
		return discoverLimit
	case pathFetch, pathApply, pathCheck, pathInfo:
		return outputLimit
	}
	return ackLimit
}

// tooLargeError says an agent sent more than a message's limit.
type tooLargeError struct {
	// what names the message ("the answer to /fetch"), call the call.
	what, call string
	limit      int64
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %s, the limit of that message", e.what, formatBytes(e.limit))
}

// formatBytes writes a limit for people: 64 KiB, 8 MiB.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// cappedReader reads at most limit bytes of r; reading a byte past them
// fails with its tooLargeError. Unlike io.LimitReader it tells a message
// that ends at its limit from one that goes on.
type cappedReader struct {
	r    io.Reader
	left int64
	err  *tooLargeError
}

func capped(r io.Reader, e *tooLargeError) *cappedReader {
	return &cappedReader{r: r, left: e.limit, err: e}
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// At the limit: one more byte means the message is too large.
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			return 0, c.err
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// decodeAnswer decodes the answer of the call to path into out (nil: an
// answer that carries nothing, read and dropped), reading no more than the
// call's limit. What follows the JSON value is not read.
func decodeAnswer(body io.Reader, path string, out any) error {
	return decodeLimited(body, &tooLargeError{what: "the answer to " + path, call: path, limit: answerLimit(path)}, out)
}

// decodeLimited decodes a message of at most e.limit bytes into out (nil:
// read and dropped); a larger one fails with e.
func decodeLimited(body io.Reader, e *tooLargeError, out any) error {
	r := capped(body, e)
	if out == nil {
		_, err := io.Copy(io.Discard, r)
		return err
	}
	return json.NewDecoder(r).Decode(out)
}

// readErrorBody reads the body of a failed call to path.
func readErrorBody(body io.Reader, path string) ([]byte, error) {
	return io.ReadAll(capped(body, &tooLargeError{what: "the error answer to " + path, call: path, limit: errorLimit}))
}

// answerError is the error the failed answer (status, body) of the call to
// path says: its callError, else its status and text; or a tooLargeError.
func answerError(status string, body io.Reader, path string) error {
	data, err := readErrorBody(body, path)
	if errors.As(err, new(*tooLargeError)) {
		return err
	}
	// Another read error (the stream was cut): say what came.
	var ce callError
	if json.Unmarshal(data, &ce) != nil || ce.Error == "" {
		ce.Error = fmt.Sprintf("agent answered %s: %s", status, strings.TrimSpace(string(data)))
	}
	err = errors.New(ce.Error)
	if ce.Permanent {
		err = runtimes.Permanent(err)
	}
	return err
}

// readLines calls fn with each non-empty line of the stream of the call to
// path until it ends; a line longer than limit fails with a tooLargeError.
func readLines(r io.Reader, path string, limit int, fn func([]byte)) error {
	sc := bufio.NewScanner(r)
	// The buffer holds a line and its end: one more byte.
	sc.Buffer(make([]byte, 0, min(limit+1, 4<<10)), limit+1)
	for sc.Scan() {
		if len(sc.Bytes()) > 0 {
			fn(sc.Bytes())
		}
	}
	err := sc.Err()
	if errors.Is(err, bufio.ErrTooLong) {
		return &tooLargeError{what: "a line of the stream of " + path, call: path, limit: int64(limit)}
	}
	return err
}

// streamLimiter is a listener that has at most n of its connections open
// at once: Accept waits for one to close. It bounds the streams an agent
// opens on its session.
type streamLimiter struct {
	net.Listener
	slots chan struct{}
	// done ends a wait for a slot (the session ended).
	done <-chan struct{}
}

func limitStreams(l net.Listener, n int, done <-chan struct{}) *streamLimiter {
	return &streamLimiter{Listener: l, slots: make(chan struct{}, n), done: done}
}

func (l *streamLimiter) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, release: func() { <-l.slots }}, nil
}

// slotConn gives its listener's slot back once closed.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
