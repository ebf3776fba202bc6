package remote

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/runtimes"
)

// answerOf returns a new value of what the hub decodes the answer to path
// into (nil: an answer that carries nothing).
func answerOf(path string) any {
	switch path {
	case pathHello:
		return new(Hello)
	case pathFetch:
		return new(runtimes.State)
	case pathApply:
		return new(runtimes.ApplyResult)
	case pathCheck:
		return new(checkOutcome)
	case pathInfo:
		return new([]runtimes.InfoOutput)
	case pathDiscover:
		return new(facts)
	case pathRuns:
		return new(runtimes.Run)
	}
	return nil
}

// countingReader counts what was read of r.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// FuzzHubDecode feeds the hub's readers of agent messages (the hello, the
// answers of every call, error bodies, a watch's lines, runs handed back)
// with any bytes, under the real limits and under a small one (limit, so
// that short inputs cross it). Each must: read at most the limit and one
// byte; fail as too large only when the message passes the limit; and,
// under the limit, decode as encoding/json does.
func FuzzHubDecode(f *testing.F) {
	seeds := []struct {
		path, body string
	}{
		{pathHello, `{"version":"v1.4.2","mode":"kubernetes","host":"node-1"}`},
		{pathHello, strings.Repeat("[", 200)},
		{pathHello, `{"version":"` + strings.Repeat("A", 300) + `"}`},
		{pathFetch, `{"version":"v1","converged":true,"objects":[{"objectType":"Deployment","name":"web","replicas":2,"availableReplicas":2,"targetReplicas":2,"status":"SUCCEEDED"}]}`},
		{pathFetch, `{"version":"v1"} trailing`},
		{pathApply, `{"changes":[{"object":"Deployment/web","action":"created"}]}`},
		{pathCheck, `{"passed":true,"message":"ready on prod"}`},
		{pathInfo, `[{"name":"url","text":"https://web.example"}]`},
		{pathDiscover, `{"kubeVersion":"v1.31.0","apiVersions":["v1","apps/v1"]}`},
		{pathPeers, `{}`},
		{pathRuns, `{"runtime":"cmds","kind":"apply","exitCode":0,"stdout":"applied\n"}`},
		{pathWatch, "{\"application\":\"shop\",\"service\":\"web\",\"releaseChannel\":\"prod\"}\n\n{}\r\n"},
		{pathApply + "!error", `{"error":"apply failed","permanent":true}`},
		{pathApply + "!error", "not json at all"},
	}
	for _, s := range seeds {
		f.Add(s.path, []byte(s.body), uint16(0))
		f.Add(s.path, []byte(s.body), uint16(len(s.body)/2+1))
	}
	f.Fuzz(func(t *testing.T, path string, body []byte, small uint16) {
		call, isError := strings.CutSuffix(path, "!error")
		limit := answerLimit(call)
		switch {
		case isError:
			limit = errorLimit
		case call == pathRuns:
			limit = runLimit
		case call == pathWatch:
			limit = watchLineLimit
		}
		if small > 0 {
			limit = int64(small)
		}
		e := &tooLargeError{what: "a message", call: call, limit: limit}
		src := &countingReader{r: bytes.NewReader(body)}
		var err error
		switch {
		case call == pathWatch:
			var lines [][]byte
			err = readLines(src, call, int(limit), func(l []byte) { lines = append(lines, bytes.Clone(l)) })
			longest := 0
			for _, l := range bytes.Split(body, []byte("\n")) {
				longest = max(longest, len(l))
			}
			if big := errors.As(err, new(*tooLargeError)); big != (int64(longest) > limit) {
				t.Fatalf("a line of %d bytes under a limit of %d: %v", longest, limit, err)
			}
			for _, l := range lines {
				if int64(len(l)) > limit {
					t.Fatalf("a line of %d bytes passed a limit of %d", len(l), limit)
				}
			}
		case isError:
			err = answerError("422 Unprocessable Entity", capped(src, e), call)
			if err == nil {
				t.Fatal("a failed call's answer gave no error")
			}
		default:
			out := answerOf(call)
			err = decodeLimited(src, e, out)
			if int64(len(body)) <= limit {
				want := answerOf(call)
				werr := json.NewDecoder(bytes.NewReader(body)).Decode(want)
				if out == nil {
					werr = nil
				}
				if errors.As(err, new(*tooLargeError)) || (err == nil) != (werr == nil) {
					t.Fatalf("%d bytes under a limit of %d: %v; encoding/json: %v", len(body), limit, err, werr)
				}
				if err == nil && !reflect.DeepEqual(out, want) {
					t.Fatalf("decoded %#v; encoding/json: %#v", out, want)
				}
			}
		}
		if errors.As(err, new(*tooLargeError)) && int64(len(body)) <= limit {
			t.Fatalf("%d bytes refused as larger than %d", len(body), limit)
		}
		// A watch's stream is as long as its session; its lines are bounded.
		if call != pathWatch && int64(src.n) > limit+1 {
			t.Fatalf("read %d bytes under a limit of %d", src.n, limit)
		}
	})
}
