package custom

import (
	"encoding/json"
	"strings"

	"github.com/drover-dev/drover/internal/customspec"
	"github.com/drover-dev/drover/internal/runtimes"
)

// withSecrets completes a built command with the target's secrets:
//   - raw secrets of the target's env (service env, release channel
//     policy.defaultEnv) are redacted from what is recorded, like those of the
//     command's own env (S4);
//   - a raw secret parameter of the runtime reaches the command as its value:
//     the compiler rendered it as customspec.SecretMarker(name) in the commands
//     and carries the value in the object's secrets; the marker is replaced
//     in argv, in the values of the program's and the command's env and in
//     every string of a Job manifest, and the value is redacted from
//     everything recorded (B5). Compile output and the stored desired
//     state only ever show the marker and "(redacted)". The compiler
//     refuses a marker that a template did not output as
//     {{.Params.NAME}}; text that only looks like one elsewhere
//     (the service's env, the release channel's defaultEnv, the version
//     pushed, drover's own environment) is left as it is.
func (c *command) withSecrets(t *runtimes.Target) {
	c.secrets = append(c.secrets, t.Secrets...)
	params := secretParams(t)
	if len(params) == 0 {
		return
	}
	pairs := make([]string, 0, 2*len(params))
	for name, value := range params {
		pairs = append(pairs, customspec.SecretMarker(name), value)
		c.secrets = append(c.secrets, value)
	}
	rep := strings.NewReplacer(pairs...)
	for i, a := range c.argv {
		c.argv[i] = rep.Replace(a)
	}
	for i, kv := range c.env {
		if k, v, ok := strings.Cut(kv, "="); ok && c.rendered[k] {
			c.env[i] = k + "=" + rep.Replace(v)
		}
	}
	if c.manifest != nil {
		replaceStrings(c.manifest, rep)
	}
}

// replaceStrings applies rep to every string value in v (decoded JSON, changed
// in place).
func replaceStrings(v any, rep *strings.Replacer) any {
	switch x := v.(type) {
	case string:
		return rep.Replace(x)
	case []any:
		for i := range x {
			x[i] = replaceStrings(x[i], rep)
		}
	case map[string]any:
		for k, e := range x {
			x[k] = replaceStrings(e, rep)
		}
	}
	return v
}

// secretParams reads the raw secret parameters from the target's custom
// runtime object (name -> value).
func secretParams(t *runtimes.Target) map[string]string {
	if len(t.Objects) != 1 {
		return nil
	}
	var obj object
	if json.Unmarshal(t.Objects[0], &obj) != nil {
		return nil
	}
	out := map[string]string{}
	for name, v := range obj.Secrets {
		if v.RawSecret != "" {
			out[name] = v.RawSecret
		}
	}
	return out
}
