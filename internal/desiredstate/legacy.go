package desiredstate

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// Gates returns the approvals and checks the graph puts on release channel
// rc, in graph order, and whether an approval asks for one before every
// action.
func (d *DesiredState) Gates(rc string) (approvals []Approval, everyAction bool, checks []Check) {
	if d == nil {
		return nil, false, nil
	}
	for _, e := range d.Entities {
		if e.ReleaseChannel != rc {
			continue
		}
		switch {
		case e.ManualApproval != nil:
			approvals = append(approvals, Approval{Topic: e.ManualApproval.Topic, Description: e.ManualApproval.Description, MinApprovers: int(e.ManualApproval.MinApprovers),
				Shared: e.ManualApproval.Shared})
			everyAction = everyAction || e.ManualApproval.EveryAction
		case e.ProtectionLink != nil:
			checks = append(checks, Check{Kind: CheckProtection, Name: e.ProtectionLink.Protection, Lifecycle: e.ProtectionLink.Lifecycle, Entity: e.ID,
				Source: e.ProtectionLink.Source, Attachment: e.ProtectionLink.Attachment})
		case e.DeliveryExtension != nil:
			checks = append(checks, Check{Kind: CheckConvergenceExtension, Name: e.DeliveryExtension.Name, Lifecycle: e.DeliveryExtension.Lifecycle, Entity: e.ID})
		}
	}
	return approvals, everyAction, checks
}

// legacyResult is the part of the compiler result (as drover stored it
// before Format 2) that the engine-facing form is made of. It is read here,
// by field name, so that desired states pushed by an older drover keep
// converging after an upgrade without the engine reading compiler types.
type legacyResult struct {
	Application     string `json:"application"`
	Service         string `json:"service"`
	BundleVersion   string `json:"bundleVersion"`
	BundleName      string `json:"bundleName"`
	DisplayName     string `json:"displayName"`
	ReleaseChannels []struct {
		Name    string `json:"name"`
		Runtime struct {
			Name      string `json:"name"`
			Kind      string `json:"kind"`
			Namespace string `json:"namespace"`
		} `json:"runtime"`
		DependsOn            []string                  `json:"dependsOn"`
		Backend              string                    `json:"backend"`
		Group                string                    `json:"group"`
		Labels               map[string]string         `json:"labels"`
		Objects              []json.RawMessage         `json:"objects"`
		Env                  map[string]legacyEnvValue `json:"env"`
		AutoRollbackDisabled bool                      `json:"autoRollbackDisabled"`
		ProgressDeadline     *Duration                 `json:"progressDeadline"`
		Protections          []Attachment              `json:"protections"`
		Extensions           []Extension               `json:"extensions"`
	} `json:"releaseChannels"`
	DesiredState *DesiredState `json:"desiredState"`
}

type legacyEnvValue struct {
	Value            string          `json:"value"`
	RawSecret        string          `json:"rawSecret"`
	Secret           json.RawMessage `json:"secret"`
	KubernetesSecret json.RawMessage `json:"kubernetesSecret"`
}

// A runner object (a custom runtime's, a terraform or other runner's)
// holds the settings that set channel behaviour under the field its kind
// names: {"kind": "custom", "custom": {...}}.
type runnerSettings struct {
	Grace   Duration `json:"convergenceGracePeriod"`
	Approve bool     `json:"requireApprovalBeforeApply"`
}

func decodeLegacy(raw []byte) (*Compiled, error) {
	var res legacyResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("decode desired state (stored by an earlier drover): %w", err)
	}
	c := &Compiled{
		Format: Format, Application: res.Application, Service: res.Service,
		Version: res.BundleVersion, BundleName: res.BundleName, DisplayName: res.DisplayName, Graph: res.DesiredState,
	}
	for _, rc := range res.ReleaseChannels {
		ch := Channel{
			Name: rc.Name, Runtime: rc.Runtime.Name, RuntimeKind: rc.Runtime.Kind, Namespace: rc.Runtime.Namespace,
			Backend: rc.Backend, DependsOn: rc.DependsOn, AutoRollback: !rc.AutoRollbackDisabled, Objects: rc.Objects,
			Group: rc.Group, Labels: rc.Labels,
		}
		if rc.ProgressDeadline != nil {
			ch.ProgressDeadline = *rc.ProgressDeadline
		}
		var everyAction bool
		ch.Approvals, everyAction, ch.Checks = res.DesiredState.Gates(rc.Name)
		CompleteChecks(ch.Checks, rc.Protections)
		CompleteExtensions(ch.Checks, rc.Extensions)
		grace, approveEach := legacyRunnerSettings(rc.Objects)
		ch.ConvergenceGrace = Duration{grace}
		ch.EveryAction = everyAction || approveEach
		for k, v := range rc.Env {
			ch.AddEnv(k, v.Value, v.RawSecret, v.Secret != nil || v.KubernetesSecret != nil)
		}
		sort.Strings(ch.SecretEnv)
		c.Channels = append(c.Channels, ch)
	}
	return c, nil
}

// AddEnv adds an environment variable of a config as the engine carries it:
// a raw secret as a secret, a plain value as it is; one that references a
// secret store (stored) is left to the runtime that resolves it.
func (c *Channel) AddEnv(k, value, rawSecret string, stored bool) {
	switch {
	case rawSecret != "":
		c.setEnv(k, rawSecret, true)
	case !stored:
		c.setEnv(k, value, false)
	}
}

// setEnv sets an environment variable of the channel.
func (c *Channel) setEnv(k, v string, secret bool) {
	if c.Env == nil {
		c.Env = map[string]string{}
	}
	c.Env[k] = v
	if secret {
		c.SecretEnv = append(c.SecretEnv, k)
	}
}

func legacyRunnerSettings(objects []json.RawMessage) (time.Duration, bool) {
	if len(objects) != 1 {
		return 0, false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(objects[0], &obj) != nil {
		return 0, false
	}
	var kind string
	if json.Unmarshal(obj["kind"], &kind) != nil || kind == "" || obj[kind] == nil {
		return 0, false
	}
	var rs runnerSettings
	if json.Unmarshal(obj[kind], &rs) != nil {
		return 0, false
	}
	return rs.Grace.Duration, rs.Approve
}
