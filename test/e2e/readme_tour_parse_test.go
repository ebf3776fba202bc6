package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestReadmeTourParse: the tour's commands are read from marked blocks only,
// in order, with comments removed and continued lines joined; a marker
// without a shell block after it is an error, and so is a README without a
// tour.
func TestReadmeTourParse(t *testing.T) {
	write := func(text string) string {
		p := filepath.Join(t.TempDir(), "README.md")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	readme := write("# x\n\n<!-- tour: server -->\n```sh\ngo run ./cmd/drover dev\n```\n\n```sh\nmake test\n```\n" +
		"text\n<!-- tour -->\n```sh\nmake build   # bin/drover\n\nbin/drover status web \\\n  --app quickstart  # why\necho 'a # b'\nbin/drover push web --wait   # returns (exit 4) once prod waits\n```\n")
	cmds, err := readmeTour(readme)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cmds {
		got = append(got, strings.Join([]string{strconv.Itoa(c.line), c.text, map[bool]string{true: "server", false: "fg"}[c.server], strconv.Itoa(c.exit)}, "|"))
	}
	want := []string{
		"5|go run ./cmd/drover dev|server|0",
		"14|make build|fg|0",
		"16|bin/drover status web --app quickstart|fg|0",
		"18|echo 'a # b'|fg|0",
		"19|bin/drover push web --wait|fg|4",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	for name, text := range map[string]string{
		"marker without a block": "<!-- tour -->\nsome text\n",
		"no server block":        "<!-- tour -->\n```sh\nbin/drover status\n```\n",
		"no tour at all":         "```sh\ngo run ./cmd/drover dev\n```\n",
		"unclosed block":         "<!-- tour: server -->\n```sh\ngo run ./cmd/drover dev\n",
	} {
		if _, err := readmeTour(write(text)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}

	// The README itself has a tour.
	if _, err := readmeTour(filepath.Join("..", "..", "README.md")); err != nil {
		t.Error(err)
	}
}
