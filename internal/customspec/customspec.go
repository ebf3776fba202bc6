// Package customspec is the contract between the compiler and the custom
// runtime (and Terraform runner) for commands: the compiled form of a
// protection's command and how a raw secret parameter renders in a
// custom runtime's commands. It is a leaf, so that the runtimes, the
// runtime host and the agent need not import the compiler (and with it
// Helm and kustomize).
package customspec

import "github.com/drover-dev/drover/internal/config"

// ProtectionCommand is a protection's command as its runtime runs it: exit
// code 0 passes.
type ProtectionCommand struct {
	Protection       string                     `json:"protection"`
	TaskConfig       *config.TaskConfig         `json:"taskConfig,omitempty"`
	KubernetesConfig *config.KubernetesConfig   `json:"kubernetesConfig,omitempty"`
	Env              map[string]config.EnvValue `json:"env,omitempty"`
	Timeout          config.Duration            `json:"timeout,omitzero"`
}

// SecretMarker is how a raw secret parameter of a custom runtime renders in
// its commands; the runtime puts the value in its place when it runs them.
func SecretMarker(param string) string { return "(secret:" + param + ")" }
