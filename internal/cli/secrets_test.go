package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// secretsAPI is a server that answers the secrets routes and records the
// values set.
type secretsAPI struct {
	mu  sync.Mutex
	set []string
}

func (a *secretsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, ":set"):
		var req apiv1.SetSecretRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		a.mu.Lock()
		a.set = append(a.set, req.Value)
		a.mu.Unlock()
		_ = json.NewEncoder(w).Encode(apiv1.SecretVersion{Key: "db", Version: "db-0", CreatedBy: "alice"})
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, ":delete"):
		var req apiv1.DeleteSecretRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		_ = json.NewEncoder(w).Encode(apiv1.DeleteSecretResponse{Key: "db", Deleted: []string{req.Version}})
	case r.URL.Path == "/v1/secrets":
		_ = json.NewEncoder(w).Encode(apiv1.SecretList{Secrets: []apiv1.SecretInfo{{Key: "db", Latest: "db-1",
			Versions: []apiv1.SecretVersion{{Key: "db", Version: "db-0"}, {Key: "db", Version: "db-1"}}}}})
	default:
		http.NotFound(w, r)
	}
}

// runIn runs the CLI with stdin and returns its exit code, stdout and
// stderr.
func runIn(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	root := NewRoot(&stdout, &stderr)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	var exit *ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &exit):
		return exit.Code, stdout.String(), stderr.String() + exit.Error()
	}
	return 1, stdout.String(), stderr.String() + err.Error()
}

func TestSecretsCLI(t *testing.T) {
	t.Parallel()
	api := &secretsAPI{}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	conn := []string{"--server", srv.URL, "--token", "x"}
	file := filepath.Join(t.TempDir(), "v")
	if err := os.WriteFile(file, []byte("from-file\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errText := runIn(t, "from-stdin\n", append([]string{"secrets", "set", "db", "--from-stdin"}, conn...)...)
	if code != 0 || !strings.Contains(out, "version db-0") || strings.Contains(out+errText, "from-stdin") {
		t.Errorf("set --from-stdin: %d %q %q", code, out, errText)
	}
	code, out, _ = runIn(t, "", append([]string{"secrets", "set", "db", "--from-file", file, "-o", "json"}, conn...)...)
	if code != 0 || !strings.Contains(out, `"version": "db-0"`) {
		t.Errorf("set --from-file -o json: %d %q", code, out)
	}
	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"secrets", "set", "db", "--from-stdin"}, "is empty: nothing was set"},
		{"\n", []string{"secrets", "set", "db", "--from-stdin"}, "is empty: nothing was set"},
		{"v", []string{"secrets", "set", "db"}, "exactly one of --from-stdin and --from-file"},
		{"v", []string{"secrets", "set", "db", "--from-stdin", "--from-file", file}, "exactly one of --from-stdin and --from-file"},
		{"v", []string{"secrets", "set", "db", "value-on-the-command-line"}, "accepts 1 arg"},
		{"v", []string{"secrets", "set", "db", "--from-file", file + ".absent"}, "--from-file"},
	} {
		code, _, errText := runIn(t, c.stdin, append(c.args, conn...)...)
		if code == 0 || !strings.Contains(errText, c.want) {
			t.Errorf("%v: exit %d %q, want a refusal saying %q", c.args, code, errText, c.want)
		}
	}
	api.mu.Lock()
	if strings.Join(api.set, ",") != "from-stdin,from-file" {
		t.Errorf("values sent %q, want one trailing newline dropped and nothing for the refusals", api.set)
	}
	api.mu.Unlock()
	code, out, _ = runIn(t, "", append([]string{"secrets", "list"}, conn...)...)
	if code != 0 || !strings.Contains(out, "db-1 (latest)") || !strings.Contains(out, "db-0") {
		t.Errorf("list: %d %q", code, out)
	}
	code, out, _ = runIn(t, "", append([]string{"secrets", "-o", "json"}, conn...)...)
	if code != 0 || !strings.Contains(out, `"latest": "db-1"`) {
		t.Errorf("secrets -o json: %d %q", code, out)
	}
	code, out, _ = runIn(t, "", append([]string{"secrets", "delete", "db", "--version", "db-0", "-o", "json"}, conn...)...)
	if code != 0 || !strings.Contains(out, `"deleted": [`) || !strings.Contains(out, `"db-0"`) {
		t.Errorf("delete -o json: %d %q", code, out)
	}
	code, out, _ = runIn(t, "", append([]string{"secrets", "delete", "db", "--version", "db-0"}, conn...)...)
	if code != 0 || !strings.Contains(out, "secret db: deleted db-0") {
		t.Errorf("delete: %d %q", code, out)
	}
}
