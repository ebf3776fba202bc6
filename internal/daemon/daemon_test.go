package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/api/client"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/cli"
)

// exitUsage is the exit code of a usage error (cli's exitUsage).
const exitUsage = 64

// runMain runs the CLI with the server verbs as the binary does and returns
// its exit code, stdout and stderr.
func runMain(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = cli.Main(args, &out, &errb, Commands()...)
	return code, out.String(), errb.String()
}

// TestB16ServerUsageErrorsExit64: the server verbs' usage errors exit 64
// with the CLI's usage message.
func TestB16ServerUsageErrorsExit64(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"server", "--log-level", "loud"},
		{"dev", "extra"},
		{"bench", "-o", "xml"},
		{"bench", "--services", "many"},
		{"bench", "--services", "0"},
		{"bench", "--rounds", "0"},
		{"bench", "--services", "10,100", "--data", "somewhere"},
		{"bench", "--rounds", "2", "--cpuprofile", "cpu.prof"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			code, _, stderr := runMain(args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
			if !strings.HasPrefix(stderr, "error: ") || !strings.Contains(stderr, "--help' for usage") {
				t.Errorf("stderr is not a usage message:\n%s", stderr)
			}
		})
	}
}

// TestB7ServerIntervalsHaveAFloor: a server started with a poll interval
// that would keep a core busy fetching (or other values the engine cannot
// run with) is refused as a usage error before anything is opened.
func TestB7ServerIntervalsHaveAFloor(t *testing.T) {
	t.Parallel()
	for _, flags := range [][]string{
		{"--steady-poll-interval", "1ns"},
		{"--poll-interval", "1ms"},
		{"--poll-interval", "0s"},
		{"--progress-deadline", "0s"},
		{"--apply-attempts", "0"},
		{"--workers", "0"},
		{"--shutdown-grace", "-1s"},
	} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			t.Parallel()
			data := filepath.Join(t.TempDir(), "data")
			args := append([]string{"server", "--data", data, "--listen", "127.0.0.1:0"}, flags...)
			code, _, stderr := runMain(args...)
			if code != exitUsage || !strings.Contains(stderr, "invalid "+flags[0]) {
				t.Errorf("exit %d, want %d with the flag named; stderr:\n%s", code, exitUsage, stderr)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("the data directory was created (stat: %v)", err)
			}
		})
	}
}

func TestS11NonLoopbackListenWarns(t *testing.T) {
	t.Parallel()
	for addr, warn := range map[string]bool{
		"127.0.0.1:7420": false, "[::1]:7420": false, "127.0.0.2:7420": false,
		"0.0.0.0:7420": true, "[::]:7420": true, "192.168.1.5:7420": true,
	} {
		msg := exposureWarning(addr)
		if (msg != "") != warn {
			t.Errorf("%s: warning %q", addr, msg)
		}
		if warn && !strings.Contains(msg, "reachable from other machines") {
			t.Errorf("%s: unclear warning %q", addr, msg)
		}
	}
	var b bytes.Buffer
	warnExposure(&b, "http://0.0.0.0:7420")
	if !strings.HasPrefix(b.String(), "warning: ") {
		t.Errorf("printed %q", b.String())
	}
}

// TestAPITLSChoice: plain HTTP on loopback unless asked; TLS (self-signed,
// recorded for the CLI) on an address other machines reach, unless
// --insecure; flags that contradict each other are usage errors.
func TestAPITLSChoice(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	log := slog.New(slog.DiscardHandler)
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7420}
	wide := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 7420}
	for _, tc := range []struct {
		name  string
		f     serverFlags
		addr  net.Addr
		tls   bool
		usage bool
	}{
		{"loopback", serverFlags{}, loopback, false, false},
		{"loopback with --tls", serverFlags{tls: true}, loopback, true, false},
		{"another address", serverFlags{}, wide, true, false},
		{"another address with --insecure", serverFlags{insecure: true}, wide, false, false},
		{"--insecure with --tls", serverFlags{insecure: true, tls: true}, wide, false, true},
		{"--tls-cert without --tls-key", serverFlags{tlsCert: "c.pem"}, wide, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			f.data = t.TempDir()
			cfg, err := f.apiTLS(tc.addr, log)
			var exit *cli.ExitError
			switch {
			case tc.usage:
				if !errors.As(err, &exit) || exit.Code != 64 {
					t.Errorf("want a usage error, got %v", err)
				}
			case err != nil:
				t.Fatal(err)
			case (cfg != nil) != tc.tls:
				t.Errorf("TLS %v, want %v", cfg != nil, tc.tls)
			case tc.tls:
				fp, err := auth.FindServerFingerprint("https://" + tc.addr.String())
				if err != nil || fp != f.tlsFingerprint || len(fp) != 64 {
					t.Errorf("recorded fingerprint %q (%v), want %q", fp, err, f.tlsFingerprint)
				}
			}
		})
	}
}

// drover bench runs end to end on a few services: every instance converges
// (the events, then the list in brief, say so) and the figures are there.
func TestBenchSmallRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data, trace := filepath.Join(dir, "data"), filepath.Join(dir, "bench.trace")
	code, stdout, stderr := runMain("bench", "--services", "4", "--channels", "3", "--data", data, "-o", "json", "--timeout", "2m", "--trace", trace)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	var res struct {
		Services, Channels, Instances int
		PushSeconds, ConvergeSeconds  float64
		CPUSeconds                    float64 `json:"cpuSeconds"`
		GCSeconds                     float64 `json:"gcCpuSeconds"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("output: %v\n%s", err, stdout)
	}
	if res.Services != 4 || res.Channels != 3 || res.Instances != 12 || res.PushSeconds <= 0 || res.ConvergeSeconds < res.PushSeconds ||
		res.CPUSeconds <= 0 || res.GCSeconds < 0 || res.GCSeconds > res.CPUSeconds {
		t.Errorf("result %+v", res)
	}
	// An execution trace starts with its header: "go 1.N trace".
	if b, err := os.ReadFile(trace); err != nil || !bytes.HasPrefix(b, []byte("go 1.")) || !bytes.Contains(b[:16], []byte(" trace")) {
		t.Errorf("--trace wrote %d bytes (%v), not an execution trace", len(b), err)
	}
}

func TestDevNextStepsStartTheCLIAsDevWasStarted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"/tmp/go-build4133296789/b001/exe/drover", true},
		{"/root/.cache/go-build/ab/abcdef/exe/drover", true},
		{"/work/bin/drover", false},
		{"bin/drover", false},
	} {
		if got := isGoRunBinary(tc.path); got != tc.want {
			t.Errorf("isGoRunBinary(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
	steps := nextSteps("go run ./cmd/drover", "http://127.0.0.1:7421")
	for _, want := range []string{
		"go build -o bin/drover ./cmd/drover",
		"  go run ./cmd/drover status web --app quickstart --server http://127.0.0.1:7421\n",
		"  go run ./cmd/drover events web --app quickstart --server http://127.0.0.1:7421\n",
	} {
		if !strings.Contains(steps, want) {
			t.Errorf("next steps lack %q:\n%s", want, steps)
		}
	}
	if steps := nextSteps("bin/drover", client.DefaultServer); strings.Contains(steps, "--server") || strings.Contains(steps, "go run") ||
		!strings.Contains(steps, "  bin/drover approve web --app quickstart --release-channel prod\n") {
		t.Errorf("next steps of bin/drover on the default address:\n%s", steps)
	}
}

func TestLogFormat(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	log, err := (&serverFlags{logLevel: "info", logFormat: "json"}).logger(&b)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("drover server listening", "url", "http://127.0.0.1:7420")
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil || rec["msg"] != "drover server listening" || rec["url"] != "http://127.0.0.1:7420" {
		t.Errorf("json log line %q: %v", b.String(), err)
	}
	if _, err := (&serverFlags{logLevel: "info", logFormat: "logfmt"}).logger(&b); err == nil || !strings.Contains(err.Error(), "use text or json") {
		t.Errorf("--log-format logfmt: %v, want a usage error", err)
	}
}
