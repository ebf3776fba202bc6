package custom

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/redact"
)

// fetchOutput is a STRUCTURED_OUTPUT fetch's stdout (Prodvana's
// FetchOutput, protojson).
type fetchOutput struct {
	Objects []fetchObject `json:"objects"`
}

type fetchObject struct {
	Name       string         `json:"name"`
	ObjectType string         `json:"objectType"`
	Versions   []fetchVersion `json:"versions"`
	Status     string         `json:"status"`
	Message    string         `json:"message"`
}

type fetchVersion struct {
	Version           string  `json:"version"`
	Replicas          flexInt `json:"replicas"`
	AvailableReplicas flexInt `json:"availableReplicas"`
	TargetReplicas    flexInt `json:"targetReplicas"`
	Active            bool    `json:"active"`
	Drifted           bool    `json:"drifted"`
}

// flexInt is an integer given as a JSON number or a numeric string
// (protojson writes 64-bit integers as strings).
type flexInt int32

func (n *flexInt) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return fmt.Errorf("invalid integer %s", b)
	}
	*n = flexInt(v)
	return nil
}

// decodeOnly decodes b, which must hold exactly one JSON value, into v.
func decodeOnly(b []byte, v any, want string) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return fmt.Errorf("printed nothing on stdout; want JSON %s", want)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return fmt.Errorf("stdout is not valid JSON (at byte %d: %w); want %s, with logs on stderr", se.Offset, err, want)
		case errors.As(err, &te):
			return fmt.Errorf("stdout JSON does not match %s: field %s: got %s, want %s", want, te.Field, te.Value, te.Type)
		}
		return fmt.Errorf("stdout is not valid JSON %s: %w", want, err)
	}
	if len(bytes.TrimSpace(b[dec.InputOffset():])) > 0 {
		return fmt.Errorf("stdout holds more than one JSON value; print only %s on stdout and logs on stderr", want)
	}
	return nil
}

const fetchWant = `{"objects":[{"name":…,"objectType":…,"versions":[{"version":…,"active":true}],"status":"SUCCEEDED"}]}`

// parseStructured reads a structured fetch's stdout. Every decoded string
// that can be shown is redacted with rd: the decoder restores a secret the
// command printed escaped (`\u003c`, `\u00e9`), which rd.Text on the raw
// stdout cannot all foresee (S4). Versions are compared with the target's
// and are redacted by redactState once interpreted.
func parseStructured(stdout []byte, rd *redact.Redactor) (fetchOutput, error) {
	var out fetchOutput
	if err := decodeOnly(stdout, &out, fetchWant); err != nil {
		return out, err
	}
	for i := range out.Objects {
		o := &out.Objects[i]
		o.Name, o.ObjectType, o.Message = rd.Field(o.Name), rd.Field(o.ObjectType), rd.Field(o.Message)
		st, ok := objectStatus(o.Status)
		if !ok {
			return out, fmt.Errorf("objects[%d] (%s): unknown status %q, want PENDING, SUCCEEDED or FAILED", i, o.Name, rd.Field(o.Status))
		}
		o.Status = string(st)
	}
	return out, nil
}

func objectStatus(s string) (runtimes.ObjectStatus, bool) {
	switch strings.ToUpper(s) {
	case "", "UNKNOWN", "UNKNOWN_STATUS", "STATUS_UNKNOWN", "PENDING":
		return runtimes.ObjectPending, true
	case "SUCCEEDED":
		return runtimes.ObjectSucceeded, true
	case "FAILED":
		return runtimes.ObjectFailed, true
	}
	return "", false
}

// structuredState interprets a structured fetch for the target version.
// It is converged when every object's active version is the target, not
// drifted, and SUCCEEDED; failed when an object running the target failed;
// drifted when an object running the target drifted. Version is the
// active version all objects share ("" when none or mixed: apply needed).
func structuredState(out fetchOutput, version string) runtimes.State {
	var st runtimes.State
	if len(out.Objects) == 0 {
		st.Message = "fetch reported no objects"
		return st
	}
	converged, mixed := true, false
	shared := ""
	var msgs []string
	for i, o := range out.Objects {
		var active *fetchVersion
		for j := range o.Versions {
			if o.Versions[j].Active {
				active = &o.Versions[j]
				break
			}
		}
		obj := runtimes.Object{ObjectType: o.ObjectType, Name: o.Name, Status: runtimes.ObjectStatus(o.Status), Message: o.Message}
		if active != nil {
			obj.Version = active.Version
			obj.Replicas = int32(active.Replicas)
			obj.AvailableReplicas = int32(active.AvailableReplicas)
			obj.TargetReplicas = int32(active.TargetReplicas)
		}
		st.Objects = append(st.Objects, obj)
		if i == 0 {
			shared = obj.Version
		} else if obj.Version != shared {
			mixed = true
		}
		atTarget := active != nil && version != "" && active.Version == version
		if atTarget && obj.Status == runtimes.ObjectFailed {
			st.Failed = true
		}
		if atTarget && active.Drifted {
			st.Drifted = true
		}
		if !atTarget || active.Drifted || obj.Status != runtimes.ObjectSucceeded {
			converged = false
		}
		if o.Message != "" {
			msgs = append(msgs, o.Name+": "+o.Message)
		}
	}
	if !mixed {
		st.Version = shared
	}
	st.Converged = converged && !st.Failed && !st.Drifted
	st.Message = strings.Join(msgs, "; ")
	if st.Message == "" && st.Drifted {
		st.Message = "fetch reports drift"
	}
	return st
}

// redactState redacts the versions of a structured fetch's state, but the
// target's own version (it is no secret: the desired state shows it), once
// they have been compared.
func redactState(st runtimes.State, version string, rd *redact.Redactor) runtimes.State {
	v := func(s string) string {
		if s == version {
			return s
		}
		return rd.Field(s)
	}
	st.Version = v(st.Version)
	st.Objects = slices.Clone(st.Objects)
	for i := range st.Objects {
		st.Objects[i].Version = v(st.Objects[i].Version)
	}
	return st
}

// infoOutput is a getInfo command's stdout.
type infoOutput struct {
	Outputs []runtimes.InfoOutput `json:"outputs"`
}

// parseInfo reads a getInfo command's stdout, redacting every decoded
// string with rd (see parseStructured).
func parseInfo(stdout []byte, rd *redact.Redactor) ([]runtimes.InfoOutput, error) {
	var out infoOutput
	if err := decodeOnly(stdout, &out, `{"outputs":[{"name":…,"text":…}]}`); err != nil {
		return nil, err
	}
	if out.Outputs == nil {
		out.Outputs = []runtimes.InfoOutput{}
	}
	for i := range out.Outputs {
		o := &out.Outputs[i]
		o.Name, o.Text = rd.Field(o.Name), rd.Field(o.Text)
	}
	return out.Outputs, nil
}
