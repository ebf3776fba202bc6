package lambdaspec

import (
	"errors"
	"testing"
)

// Function decodes create-function's JSON strictly, naming the line of
// what is wrong, and refuses what drover sets.
func TestFunction(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text string
		line int
		msg  string
	}{
		{"{\n \"Role\": \"r\",\n \"MemorySise\": 1\n}", 3, `unknown field "MemorySise" (the keys are create-function's: FunctionName, Role, Runtime, Handler, ...)`},
		{"{\n \"Role\": \"r\",\n \"Code\": {}\n}", 3, "Code is set by drover from awsLambda.code; leave it out"},
		{"{\n \"Role\": \"r\", \"Publish\": true}", 2, "Publish is drover's: it publishes a version at each release; leave it out"},
		{`{"Handler": "h"}`, 0, "Role is required: the ARN of the function's execution role"},
		{"{\n \"Role\": \"r\",\n \"MemorySize\": \"big\"\n}", 3, "MemorySize: expected int32, got a JSON string"},
	} {
		_, err := Function([]byte(c.text))
		var e *Error
		if !errors.As(err, &e) || e.Line != c.line || e.Msg != c.msg {
			t.Errorf("%s: got %v (%#v), want line %d %q", c.text, err, e, c.line, c.msg)
		}
	}
	in, err := Function([]byte(`{"FunctionName": "f", "Role": "arn:aws:iam::1:role/r", "MemorySize": 256, "Environment": {"Variables": {"A": "1"}}}`))
	if err != nil || *in.MemorySize != 256 || in.Environment.Variables["A"] != "1" {
		t.Errorf("a good function: %+v %v", in, err)
	}
}

// The spec changes with the configuration and with the code.
func TestSpec(t *testing.T) {
	t.Parallel()
	a := Object{Function: []byte(`{"Role":"r"}`), CodeSha256: ZipSha256([]byte("PK1"))}
	b := a
	b.CodeSha256 = ZipSha256([]byte("PK2"))
	c := a
	c.Function = []byte(`{"Role":"s"}`)
	if a.Spec() == b.Spec() || a.Spec() == c.Spec() || len(a.Spec()) != 16 {
		t.Errorf("specs: %s %s %s", a.Spec(), b.Spec(), c.Spec())
	}
}
