package config

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"30s", 30 * time.Second},
		{"86400s", 24 * time.Hour},
		{"1.5s", 1500 * time.Millisecond},
		{"0.1s", 100 * time.Millisecond},
		{"1.000000001s", time.Second + 1},
		{"0s", 0},
		{" 10s ", 10 * time.Second},
		{"5m", 5 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"250ms", 250 * time.Millisecond},
		{"9223372036.854775807s", math.MaxInt64},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if err != nil || got.Duration != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got.Duration, err, tt.want)
		}
	}
	for _, in := range []string{
		"", "  ", "30", "soon", "-5s", "-1m", "1e3s", "NaNs", "Infs", "+Infs", "infs",
		"0x1p3s", "99999999999999999999s", "9223372036.854775808s", "1d", "s",
	} {
		if d, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, d.Duration)
		}
	}
}

func TestDurationString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{30 * time.Second, "30s"},
		{24 * time.Hour, "86400s"},
		{1500 * time.Millisecond, "1.5s"},
		{time.Second + 1, "1.000000001s"},
		{time.Nanosecond, "0.000000001s"},
		{math.MaxInt64, "9223372036.854775807s"},
		{-1500 * time.Millisecond, "-1.5s"},
		{-time.Millisecond, "-0.001s"},
	}
	for _, tt := range tests {
		if got := (Duration{tt.d}).String(); got != tt.want {
			t.Errorf("Duration(%d).String() = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestDurationStringRoundTrip(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{1, 999999999, 123456789123456789, math.MaxInt64, 7 * time.Hour} {
		back, err := ParseDuration(Duration{d}.String())
		if err != nil || back.Duration != d {
			t.Errorf("ParseDuration(%q) = %d, %v; want %d", Duration{d}.String(), back.Duration, err, d)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	var v struct {
		D Duration `json:"d"`
		E Duration `json:"e,omitzero"`
	}
	if err := json.Unmarshal([]byte(`{"d": "5m"}`), &v); err != nil || v.D.Duration != 5*time.Minute {
		t.Fatalf("Unmarshal = %v, %v", v.D, err)
	}
	raw, err := json.Marshal(v)
	if err != nil || string(raw) != `{"d":"300s"}` {
		t.Errorf("Marshal = %s, %v", raw, err)
	}
	v.D = Duration{time.Minute}
	if err := json.Unmarshal([]byte(`{"d": null}`), &v); err != nil || v.D.Duration != time.Minute {
		t.Errorf("Unmarshal(null) = %v, %v; want unchanged", v.D, err)
	}
	for _, in := range []string{`{"d": 30}`, `{"d": "later"}`, `{"d": "-1s"}`} {
		if err := json.Unmarshal([]byte(in), &v); err == nil {
			t.Errorf("Unmarshal(%s) succeeded", in)
		}
	}
	if !(Duration{}).IsZero() || (Duration{1}).IsZero() {
		t.Error("IsZero is wrong")
	}
	if got := (Duration{}).Or(time.Hour); got != time.Hour {
		t.Errorf("zero.Or(1h) = %v", got)
	}
	if got := (Duration{time.Second}).Or(time.Hour); got != time.Second {
		t.Errorf("1s.Or(1h) = %v", got)
	}
}

func TestInt64JSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want Int64
	}{
		{`42`, 42},
		{`"42"`, 42},
		{`-7`, -7},
		{`"-7"`, -7},
		{`"9223372036854775807"`, math.MaxInt64},
		{`"-9223372036854775808"`, math.MinInt64},
	}
	for _, tt := range tests {
		var got Int64
		if err := json.Unmarshal([]byte(tt.in), &got); err != nil || got != tt.want {
			t.Errorf("Unmarshal(%s) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
		raw, err := json.Marshal(tt.want)
		if want := strconv.Quote(strconv.FormatInt(int64(tt.want), 10)); err != nil || string(raw) != want {
			t.Errorf("Marshal(%d) = %s, %v; want %s", tt.want, raw, err, want)
		}
	}
	for _, in := range []string{`1.5`, `"x"`, `""`, `"42`, `42"`, `"""42"""`, `"9223372036854775808"`, `true`, `[1]`} {
		var got Int64
		if err := json.Unmarshal([]byte(in), &got); err == nil {
			t.Errorf("Unmarshal(%s) = %d, want an error", in, got)
		}
	}
	// Called directly, it still wants both quotes or none.
	for _, in := range []string{`"42`, `42"`, `""42""`} {
		if err := new(Int64).UnmarshalJSON([]byte(in)); err == nil {
			t.Errorf("UnmarshalJSON(%s) succeeded", in)
		}
	}
	got := Int64(5)
	if err := json.Unmarshal([]byte(`null`), &got); err != nil || got != 5 {
		t.Errorf("Unmarshal(null) = %d, %v; want unchanged", got, err)
	}
	var p struct {
		V *Int64 `json:"v,omitempty"`
	}
	if err := json.Unmarshal([]byte(`{"v": "12"}`), &p); err != nil || p.V == nil || *p.V != 12 {
		t.Errorf("Unmarshal into *Int64 = %v, %v", p.V, err)
	}
}

func TestUnsupportedJSON(t *testing.T) {
	t.Parallel()
	raw, err := json.Marshal(Unsupported{})
	if err != nil || string(raw) != "null" {
		t.Errorf("Marshal(Unsupported) = %s, %v", raw, err)
	}
	if !(Unsupported{}).IsZero() {
		t.Error("Unsupported is not zero")
	}
}

func TestEnumValues(t *testing.T) {
	t.Parallel()
	// The constants must be valid values of their enum, or decoding would
	// never produce them.
	for _, c := range []struct {
		e   enum
		val string
	}{
		{KubernetesTypeKubernetes, string(KubernetesTypeKubernetes)},
		{KubernetesTypeKustomize, string(KubernetesTypeKustomize)},
		{EnvInjectNonSecret, string(EnvInjectNonSecret)},
		{EnvInjectDisabled, string(EnvInjectDisabled)},
		{RuntimeTypeLongLivedCompute, string(RuntimeTypeLongLivedCompute)},
		{RuntimeTypeExtension, string(RuntimeTypeExtension)},
		{RuntimeTypeTerraform, string(RuntimeTypeTerraform)},
		{LifecyclePreApproval, string(LifecyclePreApproval)},
		{LifecycleApproval, string(LifecycleApproval)},
		{LifecyclePostApproval, string(LifecyclePostApproval)},
		{LifecycleDeployment, string(LifecycleDeployment)},
		{LifecyclePostDeployment, string(LifecyclePostDeployment)},
		{FetchModeExitCode, string(FetchModeExitCode)},
		{FetchModeStructuredOutput, string(FetchModeStructuredOutput)},
	} {
		found := false
		for _, v := range c.e.enumValues() {
			found = found || v == c.val
		}
		if !found {
			t.Errorf("%T value %q is not in its enumValues", c.e, c.val)
		}
	}
}
