package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's tour, run as written. A shell block of README.md is part of
// the tour when the line before its fence is one of these HTML comments
// (invisible where the Markdown is rendered):
//
//	<!-- tour: server -->  each command starts a server: it runs in the
//	                       background until the tour ends, and the next block
//	                       starts once the server has the quickstart pushed
//	<!-- tour -->          each command runs in the foreground and must exit 0
//
// Blocks run in the order of the file, each command in a new `bash -c`, in
// an empty temporary directory as the working directory, with HOME,
// XDG_CONFIG_HOME and XDG_DATA_HOME (so drover dev's default data directory)
// inside it. What the test changes, and nothing else:
//   - `go run ./cmd/drover` is the binary under test (what go run would build);
//   - a command of a server block gets `--listen 127.0.0.1:PORT` appended (a
//     free port rather than the default 7420, which another drover may hold),
//     and every command gets DROVER_SERVER=http://127.0.0.1:PORT, which the
//     README says every command that talks to a server reads;
//   - `make build` and `go build -o bin/drover ./cmd/drover` put the binary
//     under test at bin/drover.
//
// Any other `go` or `make` command fails the test, and so does a command
// that exits with another code than 0 (or than the N its comment states as
// "(exit N)") or does not finish within cliTimeout (a hang).
const (
	tourMarker       = "<!-- tour -->"
	tourServerMarker = "<!-- tour: server -->"
)

// tourCommand is one command of the README's tour.
type tourCommand struct {
	line   int    // README.md's line number
	text   string // the command as written, comments removed
	server bool   // from a server block: runs in the background
	exit   int    // the exit code its comment states as "(exit N)", else 0
}

// exitNoteRE is how a tour line's comment states an exit code other than 0.
var exitNoteRE = regexp.MustCompile(`\(exit (\d+)\)`)

// TestReadmeTour runs the README's tour, literally (see tourMarker).
func TestReadmeTour(t *testing.T) {
	requireE2E(t)
	readme := filepath.Join(repoRoot, "README.md")
	cmds, err := readmeTour(readme)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, sub := range []string{"home", "config", "data"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	addr := freeAddr(t)
	env := append(cleanEnv(),
		"HOME="+filepath.Join(dir, "home"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"XDG_DATA_HOME="+filepath.Join(dir, "data"),
		"DROVER_SERVER=http://"+addr,
	)
	tour := &tourRun{t: t, dir: dir, addr: addr, env: env}
	t.Cleanup(tour.stopServers)

	for i, c := range cmds {
		if i > 0 && cmds[i-1].server && !c.server {
			tour.waitReady()
		}
		script, err := tour.script(c)
		if err != nil {
			t.Fatalf("README.md:%d: %s: %v", c.line, c.text, err)
		}
		if script == "" {
			t.Logf("README.md:%d: %s (the binary under test is bin/drover)", c.line, c.text)
			continue
		}
		if c.server {
			tour.startServer(c, script)
			continue
		}
		t.Logf("README.md:%d: %s", c.line, c.text)
		tour.run(c, script)
	}
	tour.stopServers()
}

// tourRun is the state of one run of the tour.
type tourRun struct {
	t       *testing.T
	dir     string
	addr    string
	env     []string
	servers []*tourServer
}

// tourServer is a command of a server block, running in the background.
type tourServer struct {
	cmd     tourCommand
	proc    *exec.Cmd
	logPath string
	exited  chan struct{}
}

// script is the shell text the test runs for c ("" when the test does the
// step itself), after the substitutions listed at tourMarker.
func (r *tourRun) script(c tourCommand) (string, error) {
	fields := strings.Fields(c.text)
	switch {
	case len(fields) >= 3 && fields[0] == "go" && fields[1] == "run" && fields[2] == "./cmd/drover":
		script := shellQuote(droverBin) + strings.TrimPrefix(c.text, "go run ./cmd/drover")
		if c.server {
			script += " --listen " + r.addr
		}
		return script, nil
	case c.text == "make build" || c.text == "go build -o bin/drover ./cmd/drover":
		if err := os.MkdirAll(filepath.Join(r.dir, "bin"), 0o755); err != nil {
			return "", err
		}
		bin, err := os.ReadFile(droverBin)
		if err != nil {
			return "", err
		}
		return "", os.WriteFile(filepath.Join(r.dir, "bin", "drover"), bin, 0o755)
	case fields[0] == "go" || fields[0] == "make":
		return "", errors.New("the tour test has no stand-in for this build command (see tourMarker in test/e2e/readme_tour_test.go)")
	}
	if c.server {
		return "", errors.New("a server block may only hold `go run ./cmd/drover …` commands, whose address the test can choose")
	}
	return c.text, nil
}

// command is `bash -c script` in the tour's directory, in a process group
// of its own (so a hang is killed whole).
func (r *tourRun) command(ctx context.Context, script string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = r.dir
	cmd.Env = r.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// run runs a foreground command and fails the test unless it exits 0
// within cliTimeout.
func (r *tourRun) run(c tourCommand, script string) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := r.command(ctx, script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.t.Fatalf("README.md:%d: %s\ndid not finish within %s (it hangs); its output:\n%s", c.line, c.text, cliTimeout, out.String())
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		r.t.Fatalf("README.md:%d: %s: %v", c.line, c.text, err)
	}
	if code != c.exit {
		r.t.Fatalf("README.md:%d: %s\nexited %d after %s, the README says %d; its output:\n%s", c.line, c.text, code, time.Since(start).Round(time.Millisecond), c.exit, out.String())
	}
	r.t.Logf("exit %d after %s:\n%s", code, time.Since(start).Round(time.Millisecond), out.String())
}

// startServer starts a server block's command in the background.
func (r *tourRun) startServer(c tourCommand, script string) {
	r.t.Helper()
	logPath := filepath.Join(r.dir, fmt.Sprintf("server-%d.log", len(r.servers)+1))
	logf, err := os.Create(logPath)
	if err != nil {
		r.t.Fatal(err)
	}
	defer func() { _ = logf.Close() }()
	cmd := r.command(context.Background(), script)
	cmd.Stdout, cmd.Stderr = logf, logf
	r.t.Logf("README.md:%d: %s (in the background, on %s)", c.line, c.text, r.addr)
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("README.md:%d: %s: %v", c.line, c.text, err)
	}
	s := &tourServer{cmd: c, proc: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	r.servers = append(r.servers, s)
}

// waitReady waits until the servers started have the quickstart's service
// (drover dev pushes it once the server is up), as a person waits for drover
// dev's first lines before opening another terminal.
func (r *tourRun) waitReady() {
	r.t.Helper()
	deadline := time.Now().Add(cliTimeout)
	for {
		for _, s := range r.servers {
			select {
			case <-s.exited:
				r.t.Fatalf("README.md:%d: %s\nexited (%v) before it served the quickstart; its output:\n%s", s.cmd.line, s.cmd.text, s.proc.ProcessState, readTail(s.logPath, 60))
			default:
			}
		}
		res, err := execDroverEnv(10*time.Second, r.env, []string{"status", "web", "--app", "quickstart"})
		if err == nil && res.code == 0 {
			return
		}
		if time.Now().After(deadline) {
			s := r.servers[len(r.servers)-1]
			r.t.Fatalf("README.md:%d: %s\ndid not serve the quickstart's web within %s (last status: %v %s); its output:\n%s", s.cmd.line, s.cmd.text, cliTimeout, err, res, readTail(s.logPath, 60))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stopServers sends each server SIGINT, as Ctrl-C does, and expects it to
// stop with exit 0; the server's log must hold no race or panic.
func (r *tourRun) stopServers() {
	r.t.Helper()
	for _, s := range r.servers {
		select {
		case <-s.exited:
			if !r.t.Failed() {
				r.t.Errorf("README.md:%d: %s\nexited (%v) before the tour ended; its output:\n%s", s.cmd.line, s.cmd.text, s.proc.ProcessState, readTail(s.logPath, 60))
			}
			continue
		default:
		}
		_ = syscall.Kill(-s.proc.Process.Pid, syscall.SIGINT)
		select {
		case <-s.exited:
			if code := s.proc.ProcessState.ExitCode(); code != 0 {
				r.t.Errorf("README.md:%d: %s\nexited %d on Ctrl-C (SIGINT), want 0; its output:\n%s", s.cmd.line, s.cmd.text, code, readTail(s.logPath, 60))
			}
		case <-time.After(45 * time.Second):
			_ = syscall.Kill(-s.proc.Process.Pid, syscall.SIGKILL)
			<-s.exited
			r.t.Errorf("README.md:%d: %s\ndid not stop within 45s of Ctrl-C (SIGINT); its output:\n%s", s.cmd.line, s.cmd.text, readTail(s.logPath, 60))
		}
	}
	// drover dev's server log, in its default data directory.
	logs, _ := filepath.Glob(filepath.Join(r.dir, "data", "drover", "*", "server.log"))
	for _, p := range logs {
		text, _ := os.ReadFile(p)
		for _, bad := range []string{"WARNING: DATA RACE", "panic:"} {
			if i := bytes.Index(text, []byte(bad)); i >= 0 {
				r.t.Errorf("%s contains %q:\n%s", p, bad, text[i:min(len(text), i+6000)])
			}
		}
	}
	r.servers = nil
}

// readmeTour reads the commands of the tour blocks of the README at path.
func readmeTour(path string) ([]tourCommand, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var (
		cmds    []tourCommand
		marker  string // the marker of the line before, if any
		inBlock bool
		server  bool
		pending *tourCommand // a command continued with a trailing backslash
		n       int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case !inBlock && (trimmed == tourMarker || trimmed == tourServerMarker):
			marker = trimmed
			continue
		case !inBlock && marker != "":
			if trimmed != "```sh" && trimmed != "```bash" {
				return nil, fmt.Errorf("%s:%d: a tour marker must be followed by a ```sh block, not %q", path, n, line)
			}
			inBlock, server, marker = true, marker == tourServerMarker, ""
			continue
		case !inBlock:
			continue
		case trimmed == "```":
			if pending != nil {
				return nil, fmt.Errorf("%s:%d: the block ends inside a command continued with a backslash", path, pending.line)
			}
			inBlock = false
			continue
		}
		text := stripShellComment(line)
		if pending != nil {
			pending.text += " " + strings.TrimSpace(text)
		} else if strings.TrimSpace(text) != "" {
			cmds = append(cmds, tourCommand{line: n, text: strings.TrimSpace(text), server: server})
			pending = &cmds[len(cmds)-1]
		}
		if m := exitNoteRE.FindStringSubmatch(line[len(text):]); m != nil && pending != nil {
			pending.exit, _ = strconv.Atoi(m[1])
		}
		if pending != nil {
			if cont, ok := strings.CutSuffix(pending.text, `\`); ok {
				pending.text = strings.TrimSpace(cont)
				continue
			}
		}
		pending = nil
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if inBlock {
		return nil, fmt.Errorf("%s: a tour block is not closed", path)
	}
	var servers, foreground int
	for _, c := range cmds {
		if c.server {
			servers++
		} else {
			foreground++
		}
	}
	if servers == 0 || foreground == 0 {
		return nil, fmt.Errorf("%s: no tour to run: want a block marked %s and one marked %s, found %d server and %d other commands", path, tourServerMarker, tourMarker, servers, foreground)
	}
	return cmds, nil
}

// stripShellComment removes a trailing `# comment` (a # at the start or
// after a blank, outside quotes) from a line of shell.
func stripShellComment(line string) string {
	var quote rune
	prev := ' '
	for i, c := range line {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (prev == ' ' || prev == '\t'):
			return strings.TrimRight(line[:i], " \t")
		}
		prev = c
	}
	return strings.TrimRight(line, " \t")
}

// shellQuote quotes s for bash.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// readTail is the last n lines of the file at path.
func readTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// execDroverEnv is execDrover with the environment env.
func execDroverEnv(timeout time.Duration, env, args []string) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, droverBin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return r, fmt.Errorf("drover %v did not finish within %s", args, timeout)
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		return r, fmt.Errorf("run drover %v: %w", args, err)
	}
	return r, nil
}
