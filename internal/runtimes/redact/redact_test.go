package redact

import (
	"encoding/json"
	"strings"
	"testing"
)

// The reviewer's secret: every character an encoder may escape.
const escSecret = `p"w0rd<&>é/x`

// TestS4EscapedSecretFormsRedacted: a secret printed through the common
// JSON encoders (and HCL) is replaced in raw text, not only as it is.
func TestS4EscapedSecretFormsRedacted(t *testing.T) {
	t.Parallel()
	goJSON, err := json.Marshal(escSecret)
	if err != nil {
		t.Fatal(err)
	}
	var plain strings.Builder
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(escSecret); err != nil {
		t.Fatal(err)
	}
	r := New([]string{escSecret, "ab", ""})
	for name, text := range map[string]string{
		"raw":           "token " + escSecret + " end",
		"go json":       "token " + string(goJSON) + " end",
		"json no html":  "token " + strings.TrimSpace(plain.String()) + " end",
		"python ascii":  `token "p\"w0rd<&>\u00e9/x" end`,
		"upper hex":     `token "p\"w0rd\u003C\u0026\u003E\u00E9/x" end`,
		"php":           `token "p\"w0rd<&>\u00e9\/x" end`,
		"terraform hcl": `token "p\"w0rd<&>é/x" end`,
	} {
		got := r.Text(text)
		if strings.Contains(got, "w0rd") {
			t.Errorf("%s: %q not redacted: %q", name, text, got)
		}
		if !strings.HasPrefix(got, "token ") || !strings.HasSuffix(got, " end") {
			t.Errorf("%s: the text around the secret changed: %q", name, got)
		}
	}
	// HCL's template escapes.
	tr := New([]string{"a${b}%{c}"})
	if got := tr.Text(`x = "a$${b}%%{c}"`); got != `x = "(redacted)"` {
		t.Errorf("hcl template escapes: %q", got)
	}
	// A secret beyond the BMP, escaped as a surrogate pair.
	sr := New([]string{"key-😀"})
	if got := sr.Text(`"key-\ud83d\ude00"`); got != `"(redacted)"` {
		t.Errorf("surrogate pair: %q", got)
	}
}

// TestS4ShortSecretWholeFieldRedacted: a secret shorter than MinTextLen is
// left in text (replacing it would garble the output) but a decoded field
// that is exactly the secret is hidden.
func TestS4ShortSecretWholeFieldRedacted(t *testing.T) {
	t.Parallel()
	r := New([]string{"ab", "x"})
	if got := r.Text("about a cab"); got != "about a cab" {
		t.Errorf("text with a short secret changed: %q", got)
	}
	for _, s := range []string{"ab", "x"} {
		if got := r.Field(s); got != Marker {
			t.Errorf("Field(%q) = %q, want %q", s, got, Marker)
		}
	}
	if got := r.Field("abc"); got != "abc" {
		t.Errorf("Field(abc) = %q", got)
	}
	var nilR *Redactor
	if nilR.Text("s") != "s" || nilR.Field("s") != "s" {
		t.Error("a nil Redactor changed its input")
	}
}

// TestRedactLongestFirst: a secret that contains another is replaced whole.
func TestRedactLongestFirst(t *testing.T) {
	t.Parallel()
	r := New([]string{"SECRET", "SECRET-LONGER"})
	if got := r.Text("a SECRET-LONGER b SECRET"); got != "a (redacted) b (redacted)" {
		t.Errorf("got %q", got)
	}
}

func FuzzForms(f *testing.F) {
	f.Add(escSecret)
	f.Add("\xff\xfe")
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) < MinTextLen {
			return
		}
		b, err := json.Marshal(s)
		if err != nil {
			return
		}
		if got := New([]string{s}).Text(string(b)); got != `"`+Marker+`"` && strings.ToValidUTF8(s, "") == s {
			t.Errorf("json of %q: %q", s, got)
		}
	})
}
