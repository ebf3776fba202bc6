package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bashCompletionScript is bash-completion's main script (Debian's
// bash-completion package), which cobra's bash scripts use.
const bashCompletionScript = "/usr/share/bash-completion/bash_completion"

// TestCompletionBash runs the script drover completion bash prints, in a
// real bash, as a TAB would: with COMP_WORDS and COMP_CWORD set, it calls
// the script's completion function, which runs the binary (drover
// __complete …), and reads COMPREPLY. Subcommands, flags and -o formats
// complete without a server; services and release channels are asked of
// the one DROVER_SERVER names.
func TestCompletionBash(t *testing.T) {
	requireE2E(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	// The script runs ${words[0]}: drover, on PATH.
	binDir := t.TempDir()
	if err := os.Symlink(droverBin, filepath.Join(binDir, "drover")); err != nil {
		t.Fatal(err)
	}
	r := runDrover(t, "completion", "bash")
	if r.code != 0 {
		t.Fatalf("drover completion bash: %s", r)
	}
	script := filepath.Join(t.TempDir(), "drover.bash")
	if err := os.WriteFile(script, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	prelude := "source " + bashCompletionScript + "\n"
	if _, err := os.Stat(bashCompletionScript); err != nil {
		// Without the package (CI installs it): the one function of it the
		// script needs, splitting the line as bash-completion does for
		// the words of these tests (no quotes, no = or :).
		t.Logf("%s not found: using a minimal _get_comp_words_by_ref", bashCompletionScript)
		prelude = `_get_comp_words_by_ref() {
  words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}
}
`
	}
	s := newServer(t)
	dir := copyQuickstart(t, "1s")
	s.ok("alice", "apply", dir+"/...")
	s.push("alice", "quickstart", "web", "image=1.27")

	complete := func(line string) []string {
		t.Helper()
		words := strings.Fields(line)
		if strings.HasSuffix(line, " ") {
			words = append(words, "") // completing a new word
		}
		cword := len(words) - 1
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, "'"+w+"'")
		}
		prog := prelude + "source " + script + "\n" +
			"COMP_WORDS=(" + strings.Join(quoted, " ") + ")\n" +
			"COMP_CWORD=" + strconv.Itoa(cword) + "\n" +
			"COMP_LINE='" + line + "'\nCOMP_POINT=${#COMP_LINE}\n" +
			"__start_drover\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bash, "--norc", "--noprofile", "-c", prog)
		cmd.Env = append(cleanEnv(), "PATH="+binDir+":"+os.Getenv("PATH"), "DROVER_SERVER="+s.url)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("complete %q: %v\nstderr:\n%s", line, err, stderr.String())
		}
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
		return out
	}

	for _, tc := range []struct {
		line string
		want []string
	}{
		{"drover st", []string{"status"}},
		{"drover app", []string{"apply", "approve"}},
		{"drover status -o ", []string{"json", "text"}},
		{"drover wait web --wait-f", []string{"--wait-for-approval"}},
		{"drover push ", []string{"web"}},
		{"drover status w", []string{"web"}},
		{"drover approve web --app ", []string{"quickstart"}},
		{"drover approve web --app quickstart --release-channel ", []string{"prod", "staging"}},
	} {
		got := complete(tc.line)
		// bash-completion keeps descriptions out of COMPREPLY only when
		// several candidates remain; compare the words themselves.
		for i, g := range got {
			got[i], _, _ = strings.Cut(g, " ")
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s<TAB>: got %q, want %q", tc.line, got, tc.want)
		}
	}
}
