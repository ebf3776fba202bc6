// Package lambdaspec is the compiled form of a service on an AWS Lambda
// runtime (drover's own kind), shared by the compiler (which renders and
// checks it) and the Lambda runtime (which applies it): the function's
// configuration as the JSON aws lambda create-function --cli-input-json
// takes (without Code), decoded strictly into the AWS SDK's input type,
// its code (a zip's content or an image URI) and the alias to move.
package lambdaspec

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"
)

// Kind is the kind of a compiled Lambda object (Object.Kind), and the
// backend of a compiled channel that runs on Lambda.
const Kind = "awsLambda"

// DefaultAlias is the alias drover moves when the service names none.
const DefaultAlias = "live"

// ConvergenceGrace is how long after an apply the alias may still not
// show the new version before the engine applies again: Lambda answers
// at once, so a minute (runtimes.GraceReporter).
const ConvergenceGrace = time.Minute

// Object is what the Lambda runtime applies for one service instance.
type Object struct {
	Kind    string `json:"kind"`
	Runtime string `json:"runtime"`
	// FunctionName is the function's name (the JSON's FunctionName, or
	// the service's name).
	FunctionName string `json:"functionName"`
	// Function is the rendered CreateFunction JSON without Code, canonical
	// (keys sorted, compact), with the service's env in
	// Environment.Variables.
	Function json.RawMessage `json:"function"`
	// ZipBase64 is the deployment package, base64; CodeSha256 its SHA-256
	// in base64, as Lambda reports a function's CodeSha256. ImageURI is
	// the container image instead.
	ZipBase64  string `json:"zipBase64,omitempty"`
	CodeSha256 string `json:"codeSha256,omitempty"`
	ImageURI   string `json:"imageUri,omitempty"`
	// Alias is the alias drover moves to the version it publishes.
	Alias string `json:"alias"`
	// PreviousVersionWeight, when set, is the share of invocations the
	// alias keeps on the version it served before (a canary).
	PreviousVersionWeight float64 `json:"previousVersionWeight,omitempty"`
	// Adopt takes over a function of the name that drover does not own.
	Adopt bool `json:"adopt,omitempty"`
}

// Spec is a hash of what the object deploys (configuration and code):
// a published version whose description carries it runs exactly this.
func (o *Object) Spec() string {
	h := sha256.New()
	h.Write(o.Function)
	h.Write([]byte{0})
	h.Write([]byte(o.CodeSha256))
	h.Write([]byte{0})
	h.Write([]byte(o.ImageURI))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// ZipSha256 is the SHA-256 of a deployment package as Lambda reports it
// (base64 of the digest).
func ZipSha256(zip []byte) string {
	sum := sha256.Sum256(zip)
	return base64.StdEncoding.EncodeToString(sum[:])
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

// Function decodes a function's configuration (create-function's input)
// strictly: unknown fields and wrong types are errors, and the fields
// drover sets (Code, Publish) are refused.
func Function(text []byte) (*lambda.CreateFunctionInput, error) {
	var in lambda.CreateFunctionInput
	if err := decodeStrict(text, &in, true); err != nil {
		return nil, err
	}
	switch {
	case in.Code != nil:
		return nil, &Error{Line: lineOf(text, `"Code"`), Msg: "Code is set by drover from awsLambda.code; leave it out"}
	case in.Publish:
		return nil, &Error{Line: lineOf(text, `"Publish"`), Msg: "Publish is drover's: it publishes a version at each release; leave it out"}
	case in.Role == nil || *in.Role == "":
		return nil, &Error{Msg: "Role is required: the ARN of the function's execution role"}
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
		return &Error{Line: lineAt(text, typ.Offset), Msg: fmt.Sprintf("%s: expected %s, got a JSON %s", field, typ.Type, typ.Value)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &Error{Line: lineOf(text, `"`+name+`"`), Msg: fmt.Sprintf("unknown field %q (the keys are create-function's: FunctionName, Role, Runtime, Handler, ...)", name)}
	case errors.Is(err, io.EOF):
		return &Error{Msg: "empty document: want a JSON object"}
	}
	return &Error{Msg: err.Error()}
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
