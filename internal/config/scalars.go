package config

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a protobuf-style duration. Prodvana writes durations as seconds with
// an "s" suffix ("30s", "86400s", "1.5s"); drover also accepts Go duration syntax
// ("5m", "1h30m") as an extension. It marshals back to the seconds form.
type Duration struct{ time.Duration }

// ParseDuration parses "<seconds>s" or a Go duration string.
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Duration{}, fmt.Errorf("empty duration")
	}
	// "<seconds>s" is a Go duration too; time.ParseDuration reads it exactly and
	// rejects what a float parser would let through (NaN, Inf, 1e3, overflow).
	d, err := time.ParseDuration(s)
	if err != nil {
		return Duration{}, fmt.Errorf("invalid duration %q: want seconds like \"30s\" or a Go duration like \"5m\"", s)
	}
	if d < 0 {
		return Duration{}, fmt.Errorf("invalid duration %q: must not be negative", s)
	}
	return Duration{d}, nil
}

// IsZero reports whether the duration is unset.
func (d Duration) IsZero() bool { return d.Duration == 0 }

// Or returns d, or def when d is unset.
func (d Duration) Or(def time.Duration) time.Duration {
	if d.Duration == 0 {
		return def
	}
	return d.Duration
}

// String renders the seconds form Prodvana uses, exactly ("1.5s", "86400s").
func (d Duration) String() string {
	sec, ns := d.Duration/time.Second, d.Duration%time.Second
	s := strconv.FormatInt(int64(sec), 10)
	if ns != 0 {
		if ns < 0 {
			ns = -ns
			if sec == 0 {
				s = "-0"
			}
		}
		s += "." + strings.TrimRight(fmt.Sprintf("%09d", int64(ns)), "0")
	}
	return s + "s"
}

// MarshalJSON writes the seconds form.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads either accepted form.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string: %w", err)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// Int64 is an int64 that protojson writes as a string; YAML may give it as a
// number or a string.
type Int64 int64

// MarshalJSON writes the protojson string form.
func (i Int64) MarshalJSON() ([]byte, error) {
	return json.Marshal(strconv.FormatInt(int64(i), 10))
}

// UnmarshalJSON reads a number or a numeric string.
func (i *Int64) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("invalid int64 %s", b)
	}
	*i = Int64(v)
	return nil
}

// Unsupported marks a Prodvana field drover does not implement yet. The decoder
// rejects any value for it with "not supported yet: <field>"; it is never set.
type Unsupported struct{}

// IsZero lets encoders omit the field.
func (Unsupported) IsZero() bool { return true }

// MarshalJSON writes null; the field is never set.
func (Unsupported) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

// enum is implemented by string-valued enums. Values are listed in proto order,
// so a number given in YAML is the index into the list (Prodvana accepts both).
type enum interface {
	enumValues() []string
}

// KubernetesConfigType says how referenced Kubernetes files are rendered.
type KubernetesConfigType string

// Kubernetes config types.
const (
	KubernetesTypeKubernetes KubernetesConfigType = "KUBERNETES"
	KubernetesTypeKustomize  KubernetesConfigType = "KUSTOMIZE"
)

func (KubernetesConfigType) enumValues() []string {
	return []string{"UNKNOWN", "KUBERNETES", "KUSTOMIZE"}
}

// EnvInjectionMode says whether service env is injected into containers.
type EnvInjectionMode string

// Env injection modes.
const (
	EnvInjectNonSecret EnvInjectionMode = "ENV_INJECT_NON_SECRET_ENV" //nolint:gosec // G101 false positive: an enum value naming an injection mode, not a credential
	EnvInjectDisabled  EnvInjectionMode = "ENV_INJECT_DISABLED"
)

func (EnvInjectionMode) enumValues() []string {
	return []string{"ENV_INJECT_UNKNOWN", "ENV_INJECT_DISABLED", "ENV_INJECT_NON_SECRET_ENV"}
}

// RuntimeType is the kind of a release channel's runtime connection.
type RuntimeType string

// Runtime connection types.
const (
	RuntimeTypeLongLivedCompute RuntimeType = "LONG_LIVED_COMPUTE"
	RuntimeTypeExtension        RuntimeType = "EXTENSION"
	RuntimeTypeTerraform        RuntimeType = "TERRAFORM"
)

func (RuntimeType) enumValues() []string {
	return []string{"UNKNOWN_CONNECTION", "LONG_LIVED_COMPUTE", "EXTENSION", "AWS_ECS", "GOOGLE_CLOUD_RUN", "FLY", "TERRAFORM", "PULUMI"}
}

// ParametersAutogen controls automatic parameters for programs (ignored for Kubernetes configs).
type ParametersAutogen string

func (ParametersAutogen) enumValues() []string {
	return []string{"UNKNOWN", "NONE", "IMAGE", "IMAGE_AND_REPLICAS"}
}

// Lifecycle is a convergence phase of a service instance.
type Lifecycle string

// Convergence phases, in order.
const (
	LifecyclePreApproval    Lifecycle = "PRE_APPROVAL"
	LifecycleApproval       Lifecycle = "APPROVAL"
	LifecyclePostApproval   Lifecycle = "POST_APPROVAL"
	LifecycleDeployment     Lifecycle = "DEPLOYMENT"
	LifecyclePostDeployment Lifecycle = "POST_DEPLOYMENT"
)

func (Lifecycle) enumValues() []string {
	return []string{"UNKNOWN_TASK_LIFECYCLE", "CONVERGENCE_START", "PRE_APPROVAL", "APPROVAL", "POST_APPROVAL", "DEPLOYMENT", "POST_DEPLOYMENT"}
}

// FailureBehavior says what a failing deployment protection does.
type FailureBehavior string

func (FailureBehavior) enumValues() []string {
	return []string{"UNKNOWN_PROTECTION_FAILURE_BEHAVIOR", "BLOCK", "FAIL"}
}

// CustomRuntimeType is the flavour of a custom runtime.
type CustomRuntimeType string

func (CustomRuntimeType) enumValues() []string {
	return []string{"GENERIC", "TERRAFORM", "PULUMI", "AWS_ECS_EXTENSION", "GOOGLE_CLOUD_RUN_EXTENSION", "FLY_EXTENSION"}
}

// FetchMode says how a fetch command's result is read.
type FetchMode string

// Fetch modes.
const (
	FetchModeExitCode         FetchMode = "EXIT_CODE"
	FetchModeStructuredOutput FetchMode = "STRUCTURED_OUTPUT"
)

func (FetchMode) enumValues() []string {
	return []string{"UNKNOWN_FETCH_MODE", "EXIT_CODE", "STRUCTURED_OUTPUT"}
}
