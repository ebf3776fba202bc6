package custom

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
)

// escSecret holds every character a JSON encoder may escape.
const escSecret = `p"w0rd<&>é/x`

// helperEnv makes the test binary a command printing JSON (see
// TestHelperJSONCommand).
const helperEnv = "DROVER_TEST_JSON_COMMAND"

// TestHelperJSONCommand is not a test: run by a custom runtime as its
// getInfo or fetch command, it prints $ESC_SECRET and $SHORT_SECRET the way
// real programs do, through JSON encoders.
func TestHelperJSONCommand(_ *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	sec, short := os.Getenv("ESC_SECRET"), os.Getenv("SHORT_SECRET")
	var out any
	switch mode {
	case "info":
		type output struct {
			Name string `json:"name"`
			Text string `json:"text"`
		}
		out = map[string]any{"outputs": []output{
			{Name: "go", Text: "go-encoded " + sec},
			{Name: sec, Text: short},
			{Name: "short-inside", Text: "about " + short},
		}}
	case "fetch":
		out = map[string]any{"objects": []map[string]any{{
			"name": "svc", "objectType": sec, "status": "SUCCEEDED", "message": "go-encoded " + sec,
			"versions": []map[string]any{{"version": "v1", "active": true}},
		}}}
	}
	b, err := json.Marshal(out) // Go's encoder: \" \u003c \u0026 \u003e, é as is
	if err != nil {
		os.Exit(3)
	}
	s := string(b)
	if mode == "info" {
		// An ASCII-only encoder (Python's default, PHP) as well: \u00e9.
		s = strings.Replace(s, `{"name":"go"`, `{"name":"ascii","text":`+strconv.QuoteToASCII("ascii-encoded "+sec)+`},{"name":"go"`, 1)
	}
	fmt.Println(s)
	os.Exit(0)
}

// TestS4JSONEscapedSecretRedacted: a raw secret that a getInfo or
// structured fetch command prints through a JSON encoder (escaped, so not
// matched in the raw stdout) is redacted from the decoded outputs, fetch
// messages and recorded runs; a short secret is hidden where it is a whole
// decoded field.
func TestS4JSONEscapedSecretRedacted(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	helper := task(self, "-test.run=^TestHelperJSONCommand$")
	cr := &config.CustomRuntime{
		Fetch: &config.FetchCommand{TaskConfig: helper, FetchMode: "STRUCTURED_OUTPUT",
			Env: plain(helperEnv, "fetch")},
		GetInfo: &config.GetInfoCommand{TaskConfig: helper, PollInterval: dur("1h"),
			Env: plain(helperEnv, "info")},
	}
	rec := &recorder{}
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir(), Runs: rec})
	k := key("web", "stg")
	tg := target(k, "v1", cr)
	tg.Env = map[string]string{"ESC_SECRET": escSecret, "SHORT_SECRET": "ab"}
	tg.Secrets = []string{escSecret, "ab"}

	st := mustFetch(t, r, tg)
	if !st.Converged || len(st.Objects) != 1 {
		t.Fatalf("fetch state %+v", st)
	}
	if o := st.Objects[0]; o.ObjectType != "(redacted)" || o.Message != "go-encoded (redacted)" || st.Message != "svc: go-encoded (redacted)" {
		t.Errorf("fetch state shows the secret: %+v", st)
	}
	var outs []runtimes.InfoOutput
	eventually(t, "getInfo outputs", func() bool {
		outs, _ = r.Info(t.Context(), k)
		return len(outs) > 0
	})
	want := []runtimes.InfoOutput{
		{Name: "ascii", Text: "ascii-encoded (redacted)"},
		{Name: "go", Text: "go-encoded (redacted)"},
		{Name: "(redacted)", Text: "(redacted)"},
		{Name: "short-inside", Text: "about ab"},
	}
	if fmt.Sprint(outs) != fmt.Sprint(want) {
		t.Errorf("getInfo outputs\n got %+v\nwant %+v", outs, want)
	}
	runs := rec.list("")
	if len(runs) < 2 {
		t.Fatalf("runs %+v", runs)
	}
	for _, run := range runs {
		if run.Stdout == "" || strings.Contains(run.Stdout, "w0rd") {
			t.Errorf("%s run stdout not redacted: %s", run.Kind, run.Stdout)
		}
	}
}
