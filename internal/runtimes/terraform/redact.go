package terraform

import (
	"errors"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/redact"
)

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
// error, before the outcome is recorded or quoted in an error: as they are
// and in the escaped forms terraform (HCL: \" and $${) and JSON print them.
// Secrets shorter than redact.MinTextLen are left in text (see package
// redact).
func redactOutcome(o outcome, rd *redact.Redactor) outcome {
	o.stdout, o.stderr = rd.Text(o.stdout), rd.Text(o.stderr)
	if o.err != nil {
		if msg := rd.Text(o.err.Error()); msg != o.err.Error() {
			o.err = errors.New(msg)
		}
	}
	return o
}
