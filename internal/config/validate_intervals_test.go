package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestB7PollIntervalFloor: a poll or retry interval under a second is refused
// at validate time with its file, line and field (pollInterval: 1ns made the
// server fork a fetch in a tight loop); 0 (the default) and 1s pass.
func TestB7PollIntervalFloor(t *testing.T) {
	t.Parallel()
	got := validateTree(t, map[string]string{
		"runtimes/cmd.pvn.yaml": `runtime:
  name: cmd
  custom:
    apply:
      taskConfig: {program: {cmd: [deploy]}}
      retryPolicy: {baseInterval: 10ms}
    fetch:
      taskConfig: {program: {cmd: [check]}}
      pollInterval: 1ns
      steadyStatePollInterval: 999ms
      retryPolicy: {baseInterval: 1s}
    getInfo:
      taskConfig: {program: {cmd: [info]}}
      pollInterval: 0s
`,
		"runtimes/tf.pvn.yaml": `runtime:
  name: tf
  terraformRunner:
    pollInterval: 0.5s
    steadyStatePollInterval: 1h
    fetchRetryPolicy: {baseInterval: 1us}
`,
		"protections/slow.pvn.yaml": `protection:
  name: slow
  builtin: {alwaysPassing: {}}
  pollInterval: 100ms
`,
	})
	want := []string{
		"protections/slow.pvn.yaml:4:17: protection.pollInterval: 0.1s is too short: poll and retry intervals must be at least 1s (or 0 for the default)",
		"runtimes/cmd.pvn.yaml:6:35: runtime.custom.apply.retryPolicy.baseInterval: 0.01s is too short: poll and retry intervals must be at least 1s (or 0 for the default)",
		"runtimes/cmd.pvn.yaml:9:21: runtime.custom.fetch.pollInterval: 0.000000001s is too short: poll and retry intervals must be at least 1s (or 0 for the default)",
		"runtimes/cmd.pvn.yaml:10:32: runtime.custom.fetch.steadyStatePollInterval: 0.999s is too short: poll and retry intervals must be at least 1s (or 0 for the default)",
		"runtimes/tf.pvn.yaml:4:19: runtime.terraformRunner.pollInterval: 0.5s is too short: poll and retry intervals must be at least 1s (or 0 for the default)",
		"runtimes/tf.pvn.yaml:6:38: runtime.terraformRunner.fetchRetryPolicy.baseInterval: 0.000001s is too short: poll and retry intervals must be at least 1s (or 0 for the default)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
