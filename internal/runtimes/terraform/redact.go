package terraform

import (
	"errors"
	"strings"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
)

// minSecretLen: shorter raw secrets are not redacted (as in custom runtimes:
// replacing every "a" would make output unreadable and reveal the value).
const minSecretLen = 4

// rawSecrets are the raw secret values an instance's commands receive: the
// target's env (service and release channel) and the runner's env.
func rawSecrets(t runtimes.Target, runner *config.TerraformRunner) []string {
	out := append([]string(nil), t.Secrets...)
	if runner != nil {
		for _, v := range runner.Env {
			if v.RawSecret != "" {
				out = append(out, v.RawSecret)
			}
		}
	}
	return out
}

// redactOutcome replaces raw secrets in what a command printed and in its
// error, before the outcome is recorded or quoted in an error.
func redactOutcome(o outcome, secrets []string) outcome {
	r := func(s string) string {
		for _, sec := range secrets {
			if len(sec) >= minSecretLen && strings.Contains(s, sec) {
				s = strings.ReplaceAll(s, sec, "(redacted)")
			}
		}
		return s
	}
	o.stdout, o.stderr = r(o.stdout), r(o.stderr)
	if o.err != nil {
		if msg := r(o.err.Error()); msg != o.err.Error() {
			o.err = errors.New(msg)
		}
	}
	return o
}
