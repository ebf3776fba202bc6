package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// TestS4S5B5SecretsEndToEnd is the abuse report's secrets repro on a real
// server: raw secrets in the release channel's policy.defaultEnv, the
// service env, the command env, and a secret runtime parameter. The command
// receives every value (B5: the parameter too), and nothing recorded or shown
// holds one: runs (argv, stdout, stderr), getInfo outputs in status (S4),
// compile output. The report's printf "%#v" of the parameter (S5) is refused
// by validate without quoting the value.
func TestS4S5B5SecretsEndToEnd(t *testing.T) {
	requireE2E(t)
	tmp := t.TempDir()
	const app, svc = "sec", "web"
	secrets := []string{"CHANSECRET-7f3a91", "SVCSECRET-44d0e5", "CMDSECRET-b81c22", "PARAMSECRET-9e2d17"}
	apply := `set -eu
mkdir -p "$STATE_DIR"
printf '%s' '{{.Params.token}}' > "$STATE_DIR/token"
printf '%s' "$CHAN_SECRET $SVC_SECRET $CMD_SECRET" > "$STATE_DIR/env"
echo "CHAN_SECRET=$CHAN_SECRET SVC_SECRET=$SVC_SECRET CMD_SECRET=$CMD_SECRET"
echo "argv-token={{.Params.token}}" >&2
printf '%s\n' "$PVN_SERVICE_VERSION" > "$STATE_DIR/version"
`
	getInfo := `printf '{"outputs":[{"name":"s","text":"stg s: %s %s"}]}\n' "$CHAN_SECRET" "$SVC_SECRET"`
	stg := crChannel("stg", "secrt")
	stg["policy"] = crObj{"defaultEnv": crObj{"CHAN_SECRET": crObj{"rawSecret": secrets[0]}}}
	configs := func(apply string) map[string]crObj {
		applyCmd := crProgram(apply, map[string]string{"STATE_DIR": "{{.Params.stateDir}}"})
		applyCmd["env"] = crObj{"CMD_SECRET": crObj{"rawSecret": secrets[2]}}
		return map[string]crObj{
			"runtime": {"runtime": crObj{"name": "secrt", "custom": crObj{
				"apply":   applyCmd,
				"fetch":   crFetch("2s"),
				"getInfo": crProgram(getInfo, nil),
				"parameters": []crObj{
					{"name": "token", "secret": crObj{}},
					{"name": "stateDir", "required": true, "string": crObj{}},
				},
			}}},
			"app": crApp(app, stg),
			"service": {"service": crObj{"name": svc, "application": app,
				"env": crObj{"SVC_SECRET": crObj{"rawSecret": secrets[1]}},
				"customRuntime": crObj{"parameterValues": []crObj{
					{"name": "token", "secret": crObj{"rawSecret": secrets[3]}},
					{"name": "stateDir", "string": tmp + "/state"},
				}}}},
		}
	}
	dir := crWriteConfigs(t, filepath.Join(tmp, "config"), configs(apply))
	noSecret := func(what, text string) {
		t.Helper()
		for _, sec := range secrets {
			if strings.Contains(text, sec) {
				t.Errorf("%s shows %s:\n%s", what, sec, text)
			}
		}
	}
	noSecret("drover compile -o json", runDrover(t, "compile", dir+"/...", "--app", app, "--service", svc, "-o", "json").stdout)
	fmtDir := crWriteConfigs(t, filepath.Join(tmp, "fmt"), configs(apply+`echo "fmt={{printf "%#v" .Params.token}}"`+"\n"))
	r := runDrover(t, "validate", fmtDir+"/...")
	noSecret("drover validate", r.stdout+r.stderr)
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, `secret parameter "token" cannot be passed to printf`) {
		t.Errorf("validate of printf %%#v on a secret parameter: want exit 1 and a refusal, got %s", r)
	}

	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	s.push("alice", app, svc)
	crWait(s, app, svc, 0)

	if got := crReadFile(t, tmp+"/state/token"); got != secrets[3] {
		t.Errorf("the command got the secret parameter as %q, want its value", got)
	}
	if got := crReadFile(t, tmp+"/state/env"); got != strings.Join(secrets[:3], " ") {
		t.Errorf("the command got the env secrets as %q", got)
	}
	st := s.waitStatus(app, svc, 20*time.Second, "getInfo output in the status", func(st *apiv1.ServiceStatus) bool {
		c := findChannel(st, "stg")
		return c != nil && len(c.Info) == 1
	})
	if got := channel(t, st, "stg").Info[0].Text; got != "stg s: (redacted) (redacted)" {
		t.Errorf("getInfo output in the status: %q", got)
	}
	noSecret("drover status -o json", s.ok("e2e", "status", svc, "--app", app, "-o", "json").stdout)
	noSecret("drover status", s.ok("e2e", "status", svc, "--app", app).stdout)

	applies := crRunsOf(crRuns(s, app, svc), "stg", "apply")
	if len(applies) != 1 {
		t.Fatalf("apply runs: %s", dump(applies))
	}
	id := strconv.FormatInt(applies[0].ID, 10)
	text := s.ok("e2e", "run", id, "-o", "json").stdout
	noSecret("drover run", text)
	if !strings.Contains(text, "CHAN_SECRET=(redacted) SVC_SECRET=(redacted) CMD_SECRET=(redacted)") ||
		!strings.Contains(text, `argv-token=(redacted)`) {
		t.Errorf("drover run does not show the redacted values:\n%s", text)
	}
	noSecret("drover runs", s.ok("e2e", "runs", svc, "--app", app).stdout)
	noSecret("drover events", s.ok("e2e", "events", svc, "--app", app).stdout)

	// At rest: no file of the data directory (the database and its WAL
	// included) but the keyring holds a secret, nor does the server's log.
	s.kill()
	s.atRest(t, noSecret)
}

// TestB2ServerApplyRunawayTemplate: configs:apply with a runaway template
// ends with a located error in bounded time, and the server stays up.
func TestB2ServerApplyRunawayTemplate(t *testing.T) {
	requireE2E(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "config")
	writeTree(t, dir, map[string]string{
		"runtime.pvn.yaml": "runtime:\n  name: r\n  fake: {}\n",
		"app.pvn.yaml":     "application:\n  name: tpl\n  releaseChannels:\n    - {name: stg, runtimes: [{runtime: r}]}\n",
		"svc/s.pvn.yaml":   "service:\n  name: s\n  application: tpl\n  kubernetesConfig:\n    type: KUBERNETES\n    local: {path: .}\n",
		"svc/cm.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {a: '{{range 2000000000}}xxxxxxxxxxxxxxxxxxxx{{end}}', b: '{{range 100000000000}}{{end}}'}\n",
	})
	s := newServer(t)
	start := time.Now()
	r := s.as("alice", "apply", dir+"/...")
	if took := time.Since(start); took > 40*time.Second {
		t.Errorf("apply took %s", took)
	}
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "template stopped") || !strings.Contains(r.stdout+r.stderr, "cm.yaml") {
		t.Fatalf("apply of a runaway template: %s", r)
	}
	if len(r.stdout+r.stderr) > 8192 {
		t.Errorf("apply printed %d bytes", len(r.stdout+r.stderr))
	}
	// The server still answers.
	s.ok("e2e", "status", "--app", "tpl")
	if _, err := os.Stat(s.data); err != nil {
		t.Fatal(err)
	}
}
