package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/runtimes"
)

// flood is a hostile agent's answer: a prefix, then bytes without end (a
// gigabyte at most, far past every limit) until the hub stops reading.
type flood struct {
	written atomic.Int64
	done    chan struct{}
}

func newFlood() *flood { return &flood{done: make(chan struct{})} }

// slack is what an agent may write past a limit before the hub's reads
// stop it: the stream's window (256 KiB) and the buffers on both sides.
const slack = 1 << 20

func (f *flood) write(w io.Writer, prefix string) {
	defer close(f.done)
	n, _ := io.WriteString(w, prefix)
	f.written.Add(int64(n))
	chunk := bytes.Repeat([]byte("A"), 32<<10)
	for f.written.Load() < 1<<30 {
		n, err := w.Write(chunk)
		f.written.Add(int64(n))
		if err != nil {
			return
		}
	}
}

// Read makes f the body of a request: the same flood, sent by the agent.
func (f *flood) Read(p []byte) (int, error) {
	if f.written.Load() >= 1<<30 {
		return 0, io.EOF
	}
	for i := range p {
		p[i] = 'A'
	}
	f.written.Add(int64(len(p)))
	return len(p), nil
}

// wantCut checks that the hub said it cut the agent of runtime name for
// passing the limit of call, and read no more of the flood than the limit
// and the slack: the server's memory was never at stake.
func wantCut(t *testing.T, r *hubRig, name, call string, limit int64, f *flood) {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the hostile agent is still writing")
	}
	if got := f.written.Load(); got > limit+slack {
		t.Errorf("the hub let the agent send %d bytes for %s (limit %d)", got, call, limit)
	}
	logs := r.logs.String()
	for _, want := range []string{`msg="agent sent a message over its size limit; disconnecting it"`, "runtime=" + name,
		"call=" + call, fmt.Sprintf("limit_bytes=%d", limit)} {
		if !strings.Contains(logs, want) {
			t.Errorf("the hub's log lacks %q", want)
		}
	}
}

// waitAgentState waits for the store to say the agent of name is gone and
// returns why.
func waitAgentGone(t *testing.T, r *hubRig, name string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		lr, err := r.st.GetLinkedRuntime(context.Background(), name)
		if err == nil && !lr.Agent.Connected && lr.Agent.Error != "" {
			return lr.Agent.Error
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store still says the agent of %s is connected: %+v, %v", name, lr.Agent, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A hostile agent answering the hello without end is cut off at the
// hello's limit; it never registers, and the hub keeps serving the others.
func TestHubCutsOversizeHello(t *testing.T) {
	t.Parallel()
	r := newHubRig(t, nil)
	r.goodAgent(r.link("good"), "good-1")
	f := newFlood()
	s, err := r.dial(r.link("evil"), "evil-1", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		f.write(w, `{"version":"`)
	}))
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, s, "an agent sending an endless hello")
	wantCut(t, r, "evil", pathHello, helloLimit, f)
	select {
	case name := <-r.connects:
		t.Errorf("the agent of %s registered", name)
	default:
	}
	if p := r.hub.Presence("evil"); p.Connected {
		t.Errorf("presence of the cut agent: %+v", p)
	}
	if _, err := r.runtimeOf("good").Fetch(context.Background(), testTarget()); err != nil {
		t.Errorf("another runtime's agent after the attack: %v", err)
	}
}

// A hostile agent that said hello and then answers a call without end (an
// answer, an error body, a watch's line) is cut off at that call's limit:
// the call fails saying so, the session ends, the store records why, and
// the hub keeps serving the others.
func TestHubCutsOversizeAnswers(t *testing.T) {
	t.Parallel()
	fetch := func(ctx context.Context, rt runtimes.Runtime) error {
		_, err := rt.Fetch(ctx, testTarget())
		return err
	}
	for _, c := range []struct {
		call   string
		limit  int64
		invoke func(context.Context, runtimes.Runtime) error
		answer func(http.ResponseWriter, *flood)
		// wantErr is in the call's error ("" = the call does not return:
		// a watch).
		wantErr string
	}{
		{call: pathFetch, limit: outputLimit, invoke: fetch, wantErr: "the answer to /fetch is larger than 8 MiB",
			answer: func(w http.ResponseWriter, f *flood) { f.write(w, `{"version":"`) }},
		{call: pathApply, limit: errorLimit, wantErr: "the error answer to /apply is larger than 1 MiB",
			invoke: func(ctx context.Context, rt runtimes.Runtime) error {
				_, err := rt.Apply(ctx, testTarget())
				return err
			},
			answer: func(w http.ResponseWriter, f *flood) {
				w.WriteHeader(http.StatusUnprocessableEntity)
				f.write(w, `{"error":"`)
			}},
		{call: pathInfo, limit: outputLimit, wantErr: "the answer to /info is larger than 8 MiB",
			invoke: func(ctx context.Context, rt runtimes.Runtime) error {
				_, err := rt.(runtimes.InfoGetter).Info(ctx, testTarget().InstanceKey)
				return err
			},
			answer: func(w http.ResponseWriter, f *flood) { f.write(w, `[{"name":"x","text":"`) }},
		{call: pathWatch, limit: watchLineLimit,
			invoke: func(ctx context.Context, rt runtimes.Runtime) error {
				return rt.(runtimes.Watcher).Watch(ctx, func(runtimes.InstanceKey) {})
			},
			answer: func(w http.ResponseWriter, f *flood) {
				w.WriteHeader(http.StatusOK)
				_ = http.NewResponseController(w).Flush()
				_, _ = io.WriteString(w, `{"application":"shop","service":"web","releaseChannel":"prod"}`+"\n")
				f.write(w, `{"application":"`)
			}},
	} {
		t.Run(strings.TrimPrefix(c.call, "/"), func(t *testing.T) {
			t.Parallel()
			r := newHubRig(t, nil)
			r.goodAgent(r.link("good"), "good-1")
			f := newFlood()
			mux := http.NewServeMux()
			mux.HandleFunc("POST "+pathHello, func(w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, `{"version":"evil","mode":"commands","host":"evil-host"}`)
			})
			mux.HandleFunc("POST "+pathPeers, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "{}") })
			mux.HandleFunc("POST "+c.call, func(w http.ResponseWriter, _ *http.Request) { c.answer(w, f) })
			s, err := r.dial(r.link("evil"), "evil-1", mux)
			if err != nil {
				t.Fatal(err)
			}
			r.waitConnected()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if c.wantErr == "" {
				go func() { _ = c.invoke(ctx, r.runtimeOf("evil")) }()
			} else {
				err := c.invoke(ctx, r.runtimeOf("evil"))
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "the agent was disconnected") {
					t.Errorf("%s of the hostile agent: %v, want %q", c.call, err, c.wantErr)
				}
				if !errors.Is(err, runtimes.ErrUnavailable) {
					t.Errorf("%s of the hostile agent: %v is not ErrUnavailable", c.call, err)
				}
			}
			waitClosed(t, s, "an agent answering "+c.call+" without end")
			wantCut(t, r, "evil", c.call, c.limit, f)
			if why := waitAgentGone(t, r, "evil"); !strings.Contains(why, "over its size limit") || !strings.Contains(why, c.call) {
				t.Errorf("the store says the agent left because %q", why)
			}
			if _, err := r.runtimeOf("good").Fetch(ctx, testTarget()); err != nil {
				t.Errorf("another runtime's agent after the attack: %v", err)
			}
		})
	}
}

// A run handed back without end is refused at its limit and its agent cut
// off.
func TestHubCutsOversizeRun(t *testing.T) {
	t.Parallel()
	r := newHubRig(t, nil)
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+pathHello, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"version":"evil","mode":"commands"}`)
	})
	s, err := r.dial(r.link("evil"), "evil-1", mux)
	if err != nil {
		t.Fatal(err)
	}
	r.waitConnected()
	f := newFlood()
	client := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return s.Open() }}}
	req, err := http.NewRequest(http.MethodPost, "http://server"+pathRuns, io.MultiReader(strings.NewReader(`{"runtime":"`), f))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(f.done)
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
	}()
	waitClosed(t, s, "an agent handing back an endless run")
	wantCut(t, r, "evil", pathRuns, runLimit, f)
}

// A listener limited to n open connections makes the next Accept wait for
// one to close, and gives up once told the session ended.
func TestStreamLimiter(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	l := limitStreams(&pipeListener{}, 2, done)
	a, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Accept(); err != nil {
		t.Fatal(err)
	}
	third := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			_ = c.Close()
		}
		third <- err
	}()
	select {
	case err := <-third:
		t.Fatalf("a third connection was accepted while two are open (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	_ = a.Close()
	_ = a.Close() // twice: one slot back only
	if err := <-third; err != nil {
		t.Fatalf("accept once a slot is free: %v", err)
	}
	// Two open again (the second and none): fill the freed slot, then end.
	if _, err := l.Accept(); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() { _, err := l.Accept(); waiting <- err }()
	close(done)
	if err := <-waiting; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept after the session ended: %v", err)
	}
}

// pipeListener accepts one end of a new pipe each time.
type pipeListener struct{}

func (*pipeListener) Accept() (net.Conn, error) {
	c, other := net.Pipe()
	_ = other.Close()
	return c, nil
}
func (*pipeListener) Close() error   { return nil }
func (*pipeListener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "unix"} }
