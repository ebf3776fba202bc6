package custom

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
)

// The values of the abuse report's repro.
const (
	chanSecret  = "CHANSECRET-7f3a91"
	svcSecret   = "SVCSECRET-44d0e5"
	cmdSecret   = "CMDSECRET-b81c22"
	paramSecret = "PARAMSECRET-9e2d17"
)

// secretTarget is a target like the engine builds for the S4 repro: the
// release channel's and the service's raw secrets in its env, and a raw
// secret runtime parameter referenced by the commands (B5).
func secretTarget(k runtimes.InstanceKey, cr *config.CustomRuntime) runtimes.Target {
	t := target(k, "v1", cr)
	var obj map[string]any
	if err := json.Unmarshal(t.Objects[0], &obj); err != nil {
		panic(err)
	}
	obj["secrets"] = map[string]config.EnvValue{"token": {RawSecret: paramSecret}}
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	t.Objects[0] = b
	t.Env = map[string]string{"CHAN_SECRET": chanSecret, "SVC_SECRET": svcSecret, "PLAIN": "visible"}
	t.Secrets = []string{chanSecret, svcSecret}
	return t
}

// TestS4TargetEnvSecretsRedacted: raw secrets from the service env and the
// release channel's policy.defaultEnv reach the commands and are redacted
// from recorded runs (argv, stdout, stderr, errors) and getInfo outputs.
func TestS4TargetEnvSecretsRedacted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	echo := `echo "CHAN_SECRET=$CHAN_SECRET SVC_SECRET=$SVC_SECRET CMD_SECRET=$CMD_SECRET PLAIN=$PLAIN"; echo "err $SVC_SECRET" >&2`
	apply := script(t, dir, "apply.sh", echo+`; printf '%s %s' "$CHAN_SECRET" "$SVC_SECRET" > "$GOT"`)
	info := script(t, dir, "info.sh", `printf '{"outputs":[{"name":"s","text":"stg s: %s %s"}]}\n' "$CHAN_SECRET" "$SVC_SECRET"`)
	got := filepath.Join(dir, "got")
	cr := &config.CustomRuntime{
		Apply: &config.ApplyCommand{TaskConfig: task(apply), Env: map[string]config.EnvValue{
			"CMD_SECRET": {RawSecret: cmdSecret}, "GOT": {Value: got}}},
		Fetch:   &config.FetchCommand{TaskConfig: task(script(t, dir, "fetch.sh", echo+"; exit 2")), FetchMode: "EXIT_CODE"},
		GetInfo: &config.GetInfoCommand{TaskConfig: task(info), PollInterval: dur("20ms")},
	}
	rec := &recorder{}
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir(), Runs: rec})
	k := key("web", "stg")
	tg := secretTarget(k, cr)
	if _, err := r.Apply(t.Context(), tg); err != nil {
		t.Fatal(err)
	}
	if readFile(t, got) != chanSecret+" "+svcSecret {
		t.Fatal("the command did not receive the env secrets")
	}
	mustFetch(t, r, tg)
	var outs []runtimes.InfoOutput
	eventually(t, "getInfo outputs", func() bool {
		outs, _ = r.Info(t.Context(), k)
		return len(outs) == 1
	})
	if outs[0].Text != "stg s: (redacted) (redacted)" {
		t.Errorf("getInfo output %q", outs[0].Text)
	}
	runs := rec.list("")
	if len(runs) < 2 {
		t.Fatalf("runs %+v", runs)
	}
	for _, run := range runs {
		s := fmt.Sprintf("%#v", run) // %+v would print run.InstanceKey.String()
		for _, sec := range []string{chanSecret, svcSecret, cmdSecret, paramSecret} {
			if strings.Contains(s, sec) {
				t.Errorf("%s run holds %s: %s", run.Kind, sec, s)
			}
		}
	}
	if a := rec.list(kindApply)[0]; !strings.Contains(a.Stdout, "CHAN_SECRET=(redacted) SVC_SECRET=(redacted) CMD_SECRET=(redacted) PLAIN=visible") {
		t.Errorf("apply stdout %q", a.Stdout)
	}
}

// TestB5SecretParamReachesCommand: a raw secret runtime parameter, rendered
// by the compiler as a marker, reaches the command (argv and env) as its
// value, and the recorded run shows (redacted).
func TestB5SecretParamReachesCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	got := filepath.Join(dir, "got")
	apply := script(t, dir, "apply.sh", `printf '%s|%s' "$1" "$TOKEN" > "$GOT"; echo "argv-token=$1"; exit 3`)
	marker := compiler.SecretMarker("token")
	cr := &config.CustomRuntime{Apply: &config.ApplyCommand{
		TaskConfig: task(apply, "--token="+marker),
		Env:        map[string]config.EnvValue{"TOKEN": {Value: "t:" + marker}, "GOT": {Value: got}},
	}}
	rec := &recorder{}
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir(), Runs: rec})
	_, err := r.Apply(t.Context(), secretTarget(key("web", "stg"), cr))
	if err == nil {
		t.Fatal("want the apply's exit 3 as an error")
	}
	if g := readFile(t, got); g != "--token="+paramSecret+"|t:"+paramSecret {
		t.Fatalf("the command got %q, want the secret's value", g)
	}
	if strings.Contains(err.Error(), paramSecret) {
		t.Errorf("error holds the secret: %v", err)
	}
	runs := rec.list(kindApply)
	if len(runs) != 1 {
		t.Fatalf("runs %+v", runs)
	}
	if s := fmt.Sprintf("%#v", runs[0]); strings.Contains(s, paramSecret) {
		t.Errorf("recorded run holds the secret: %s", s)
	}
	if runs[0].Command[1] != "--token=(redacted)" || !strings.Contains(runs[0].Stdout, "argv-token=--token=(redacted)") {
		t.Errorf("recorded run %+v", runs[0])
	}
}

// TestB5SecretMarkerOutsideCommandNotReplaced: only the compiled command
// (argv, the program's and the command's env, where the compiler allows a
// marker only as the secret's own output) gets a secret parameter's value in
// place of its marker. Text that looks like the marker in the service's env
// or in the version pushed stays as it is: whoever sets those cannot make
// the command receive the secret.
func TestB5SecretMarkerOutsideCommandNotReplaced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	got := filepath.Join(dir, "got")
	apply := script(t, dir, "apply.sh", `printf '%s|%s|%s|%s|%s' "$1" "$TOKEN" "$RAW_TOKEN" "$SVC_MARKER" "$DROVER_SERVICE_VERSION" > "$GOT"`)
	marker := compiler.SecretMarker("token")
	cr := &config.CustomRuntime{Apply: &config.ApplyCommand{
		TaskConfig: task(apply, marker),
		// rawSecret: "{{.Params.token}}" in the command's env is compiled
		// like value: and gets the value too.
		Env: map[string]config.EnvValue{"TOKEN": {Value: marker}, "RAW_TOKEN": {RawSecret: marker}, "GOT": {Value: got}},
	}}
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir(), Runs: &recorder{}})
	tg := secretTarget(key("web", "stg"), cr)
	tg.Env["SVC_MARKER"] = marker
	tg.Version = marker
	if _, err := r.Apply(t.Context(), tg); err != nil {
		t.Fatal(err)
	}
	want := paramSecret + "|" + paramSecret + "|" + paramSecret + "|" + marker + "|" + marker
	if g := readFile(t, got); g != want {
		t.Fatalf("the command got %q, want %q", g, want)
	}
}
