// Package ecsspec is the compiled form of a service on an Amazon ECS
// runtime, shared by the compiler (which renders and checks it) and the
// ECS runtime (which applies it): the task definition and the ECS service
// definition as the JSON the AWS CLI takes with --cli-input-json
// (register-task-definition, create-service), decoded strictly into the
// AWS SDK's input types.
package ecsspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ecs"
)

// Kind is the kind of a compiled ECS object (Object.Kind), and the backend
// of a compiled channel that runs on ECS.
const Kind = "awsEcs"

// ConvergenceGrace is how long after an apply an ECS service may still not
// show the new task definition before the engine applies again: ECS
// answers at once, so a minute (runtimes.GraceReporter).
const ConvergenceGrace = time.Minute

// Object is what the ECS runtime applies for one service instance.
type Object struct {
	Kind    string `json:"kind"`
	Runtime string `json:"runtime"`
	// ServiceName names the ECS service (ecsServiceNameOverride, or the
	// service's name).
	ServiceName string `json:"serviceName"`
	// TaskDefinition and ServiceDefinition are the rendered JSON documents,
	// canonical (keys sorted, no insignificant space).
	TaskDefinition    json.RawMessage `json:"taskDefinition"`
	ServiceDefinition json.RawMessage `json:"serviceDefinition,omitempty"`
	// UpdateTaskDefinitionOnly only points the existing ECS service at the
	// task definition.
	UpdateTaskDefinitionOnly bool `json:"updateTaskDefinitionOnly,omitempty"`
	// Adopt takes over an ECS service of the name that drover does not own.
	Adopt bool `json:"adopt,omitempty"`
	// SecretEnv names the service's secret env (rawSecret, stored secret
	// references): the runtime keeps each value in an AWS Secrets Manager
	// secret of the instance (SecretName) and adds it to every container
	// definition's secrets, unless the container sets the name itself.
	// Plain env is in the task definition's environment already.
	SecretEnv []string `json:"secretEnv,omitempty"`
}

// SecretName names the AWS Secrets Manager secret that holds secret env
// variable key of a service instance.
func SecretName(application, service, releaseChannel, key string) string {
	return "drover/" + application + "/" + service + "/" + releaseChannel + "/" + key
}

// Error is a document that does not decode, with the line (1-based, 0 when
// unknown) of the rendered text where it went wrong.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// TaskDefinition decodes a task definition (register-task-definition's
// input) strictly: unknown fields and wrong types are errors.
func TaskDefinition(text []byte) (*ecs.RegisterTaskDefinitionInput, error) {
	var in ecs.RegisterTaskDefinitionInput
	if err := decode(text, &in); err != nil {
		return nil, err
	}
	if in.Family == nil || *in.Family == "" {
		return nil, &Error{Msg: "family is required"}
	}
	if len(in.ContainerDefinitions) == 0 {
		return nil, &Error{Msg: "containerDefinitions is required: at least one container"}
	}
	return &in, nil
}

// Service decodes an ECS service definition (create-service's input)
// strictly.
func Service(text []byte) (*ecs.CreateServiceInput, error) {
	var in ecs.CreateServiceInput
	if err := decode(text, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// Canonical returns text as canonical JSON (keys sorted, compact), or the
// syntax error with its line.
func Canonical(text []byte) (json.RawMessage, error) {
	var v any
	if err := decodeStrict(text, &v, false); err != nil {
		return nil, err
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, &Error{Line: 1, Msg: "want a JSON object"}
	}
	return json.Marshal(v)
}

func decode(text []byte, out any) error { return decodeStrict(text, out, true) }

func decodeStrict(text []byte, out any, strict bool) error {
	d := json.NewDecoder(bytes.NewReader(text))
	if strict {
		d.DisallowUnknownFields()
	}
	err := d.Decode(out)
	if err == nil {
		if _, extra := d.Token(); !errors.Is(extra, io.EOF) {
			return &Error{Line: lineAt(text, d.InputOffset()), Msg: "text after the JSON object"}
		}
		return nil
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return &Error{Line: lineAt(text, syn.Offset), Msg: "invalid JSON: " + syn.Error()}
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the document"
		}
		return &Error{Line: lineAt(text, typ.Offset), Msg: fmt.Sprintf("%s: expected %s, got a JSON %s", lowerPath(field), typ.Type, typ.Value)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &Error{Line: lineOf(text, `"`+name+`"`), Msg: fmt.Sprintf("unknown field %q", name)}
	case errors.Is(err, io.EOF):
		return &Error{Msg: "empty document: want a JSON object"}
	}
	return &Error{Msg: err.Error()}
}

// lowerPath writes a Go field path (ContainerDefinitions.PortMappings) as
// the JSON's (containerDefinitions.portMappings).
func lowerPath(p string) string {
	parts := strings.Split(p, ".")
	for i, s := range parts {
		if s != "" {
			parts[i] = strings.ToLower(s[:1]) + s[1:]
		}
	}
	return strings.Join(parts, ".")
}

// lineAt is the line of byte offset off in text.
func lineAt(text []byte, off int64) int {
	if off > int64(len(text)) {
		off = int64(len(text))
	}
	return bytes.Count(text[:off], []byte("\n")) + 1
}

// lineOf is the line of the first occurrence of s in text (0 if none).
func lineOf(text []byte, s string) int {
	i := bytes.Index(text, []byte(s))
	if i < 0 {
		return 0
	}
	return lineAt(text, int64(i))
}
