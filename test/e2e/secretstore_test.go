package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// TestSecretStoreEndToEnd: a secret set with drover secrets set reaches a
// custom runtime's command through secret{key, version} references (the
// release channel's defaultEnv, the service env, the command env and a
// secret parameter's secretRef), and is redacted from runs, events, status
// and compile output; a push naming a version that does not exist is
// refused, naming the field and the key; a new version is used once it is
// referenced and pushed.
func TestSecretStoreEndToEnd(t *testing.T) {
	requireE2E(t)
	tmp := t.TempDir()
	const app, svc = "vault", "web"
	const v0, v1 = "STORED-SECRET-0-5c1e9a", "STORED-SECRET-1-d73b20"
	apply := `set -eu
mkdir -p "$STATE_DIR"
printf '%s' '{{.Params.token}}' > "$STATE_DIR/token"
printf '%s' "$CHAN_SECRET $SVC_SECRET $CMD_SECRET" > "$STATE_DIR/env"
echo "CHAN_SECRET=$CHAN_SECRET SVC_SECRET=$SVC_SECRET CMD_SECRET=$CMD_SECRET"
echo "argv-token={{.Params.token}}" >&2
printf '%s\n' "$PVN_SERVICE_VERSION" > "$STATE_DIR/version"
`
	configs := func(version string) map[string]crObj {
		ref := crObj{"secret": crObj{"key": "db-password", "version": version}}
		stg := crChannel("stg", "vaultrt")
		stg["policy"] = crObj{"defaultEnv": crObj{"CHAN_SECRET": ref}}
		applyCmd := crProgram(apply, map[string]string{"STATE_DIR": "{{.Params.stateDir}}"})
		applyCmd["env"] = crObj{"CMD_SECRET": ref}
		return map[string]crObj{
			"runtime": {"runtime": crObj{"name": "vaultrt", "custom": crObj{
				"apply": applyCmd,
				"fetch": crFetch("2s"),
				"parameters": []crObj{
					{"name": "token", "secret": crObj{}},
					{"name": "stateDir", "required": true, "string": crObj{}},
				},
			}}},
			"app": crApp(app, stg),
			"service": {"service": crObj{"name": svc, "application": app,
				"env": crObj{"SVC_SECRET": ref},
				"customRuntime": crObj{"parameterValues": []crObj{
					{"name": "token", "secret": crObj{"secretRef": crObj{"key": "db-password", "version": version}}},
					{"name": "stateDir", "string": tmp + "/state"},
				}}}},
		}
	}
	noSecret := func(what, text string) {
		t.Helper()
		for _, sec := range []string{v0, v1} {
			if strings.Contains(text, sec) {
				t.Errorf("%s shows %s:\n%s", what, sec, text)
			}
		}
	}
	s := newServer(t)
	valueFile := filepath.Join(tmp, "value")
	set := func(value, want string) {
		t.Helper()
		if err := os.WriteFile(valueFile, []byte(value+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := s.ok("alice", "secrets", "set", "db-password", "--from-file", valueFile, "-o", "json")
		var v apiv1.SecretVersion
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Version != want {
			t.Fatalf("secrets set: %v %s, want version %s", err, r, want)
		}
		noSecret("drover secrets set", r.stdout+r.stderr)
	}
	set(v0, "db-password-0")
	if r := s.as("alice", "secrets", "set", "db-password", "--from-file", filepath.Join(tmp, "absent")); r.code != 64 {
		t.Errorf("secrets set from a missing file: %s, want exit 64 (usage)", r)
	}
	if err := os.WriteFile(filepath.Join(tmp, "empty"), []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := s.as("alice", "secrets", "set", "db-password", "--from-file", filepath.Join(tmp, "empty")); r.code != 64 || !strings.Contains(r.stderr, "empty") {
		t.Errorf("secrets set of an empty value: %s, want exit 64 saying it is empty", r)
	}

	// A version that does not exist refuses the push, nothing pushed.
	bad := crWriteConfigs(t, filepath.Join(tmp, "bad"), configs("db-password-5"))
	s.ok("alice", "apply", bad+"/...")
	r := s.as("alice", "push", svc, "--app", app)
	if r.code == 0 || !strings.Contains(r.stderr, "env.CHAN_SECRET.secret: secret db-password has no version db-password-5") {
		t.Fatalf("push with an unknown version: %s, want a refusal naming the field and the key", r)
	}
	if r := s.as("e2e", "status", svc, "--app", app); r.code == 0 {
		t.Errorf("the refused push made a desired state: %s", r)
	}

	dir := crWriteConfigs(t, filepath.Join(tmp, "config"), configs("db-password-0"))
	s.ok("alice", "apply", dir+"/...")
	s.push("alice", app, svc)
	crWait(s, app, svc, 0)
	if got := crReadFile(t, tmp+"/state/env"); got != strings.Join([]string{v0, v0, v0}, " ") {
		t.Errorf("the command's env secrets: %q, want the stored value three times", got)
	}
	if got := crReadFile(t, tmp+"/state/token"); got != v0 {
		t.Errorf("the secret parameter by reference: %q, want the stored value", got)
	}
	applies := crRunsOf(crRuns(s, app, svc), "stg", "apply")
	if len(applies) != 1 {
		t.Fatalf("apply runs: %s", dump(applies))
	}
	text := s.ok("e2e", "run", strconv.FormatInt(applies[0].ID, 10), "-o", "json").stdout
	noSecret("drover run", text)
	if !strings.Contains(text, "CHAN_SECRET=(redacted) SVC_SECRET=(redacted) CMD_SECRET=(redacted)") || !strings.Contains(text, "argv-token=(redacted)") {
		t.Errorf("drover run does not show the redacted values:\n%s", text)
	}
	noSecret("drover runs", s.ok("e2e", "runs", svc, "--app", app).stdout)
	noSecret("drover events", s.ok("e2e", "events", svc, "--app", app, "-o", "json").stdout)
	noSecret("drover status", s.ok("e2e", "status", svc, "--app", app, "-o", "json").stdout)
	noSecret("drover compiled", s.ok("e2e", "compiled", svc, "--app", app, "-o", "json").stdout)
	list := s.ok("e2e", "secrets", "list", "-o", "json").stdout
	noSecret("drover secrets list", list)
	if !strings.Contains(list, `"version": "db-password-0"`) || !strings.Contains(list, `"createdBy": "alice"`) {
		t.Errorf("secrets list: %s", list)
	}

	// A new version is used once referenced and pushed.
	set(v1, "db-password-1")
	dir = crWriteConfigs(t, filepath.Join(tmp, "config1"), configs("db-password-1"))
	s.ok("alice", "apply", dir+"/...")
	s.push("alice", app, svc)
	crWait(s, app, svc, 0)
	if got := crReadFile(t, tmp+"/state/env"); got != strings.Join([]string{v1, v1, v1}, " ") {
		t.Errorf("after pushing db-password-1, the command's env: %q", got)
	}
	// Deleting a version leaves what runs alone and refuses a new push of it.
	s.ok("alice", "secrets", "delete", "db-password", "--version", "db-password-1")
	if r := s.as("alice", "push", svc, "--app", app); r.code == 0 || !strings.Contains(r.stderr, "no version db-password-1") {
		t.Errorf("push of a deleted version: %s, want a refusal", r)
	}
	s.kill()
	s.atRest(t, noSecret)
}
