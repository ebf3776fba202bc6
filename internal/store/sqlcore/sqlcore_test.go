package sqlcore

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// numbered is a Dialect with numbered placeholders; only Numbered matters
// to Bind.
type numbered struct{ on bool }

func (numbered) Time(t time.Time) any      { return t }
func (numbered) ScanTime(t *time.Time) any { return t }
func (numbered) JSON(b []byte) any         { return b }
func (numbered) Text(s string) any         { return s }
func (n numbered) Numbered() bool          { return n.on }

func TestBind(t *testing.T) {
	t.Parallel()
	if got := Bind(numbered{true}, SetLinkToken); got != "UPDATE linked_runtimes SET token_hash = $1 WHERE name = $2" {
		t.Errorf("Bind numbered = %q", got)
	}
	if got := Bind(numbered{true}, InsertSecret); got != "INSERT INTO secrets ("+SecretColumns+") VALUES ($1, $2, $3, $4, $5, $6)" {
		t.Errorf("Bind numbered = %q", got)
	}
	if got := Bind(numbered{false}, SetLinkToken); got != SetLinkToken {
		t.Errorf("Bind with ? placeholders = %q, want it unchanged", got)
	}
}

func TestJSONColumn(t *testing.T) {
	t.Parallel()
	for _, src := range []any{nil, "", "null", "[]", []byte(nil), []byte("null"), []byte("[]")} {
		m := map[string]string{"kept": "yes"}
		if err := (JSONColumn{V: &m}).Scan(src); err != nil || m["kept"] != "yes" {
			t.Errorf("Scan(%#v) = %v, %v; want the value left as it is", src, err, m)
		}
	}
	var m map[string]string
	if err := (JSONColumn{V: &m}).Scan([]byte(`{"a":"b"}`)); err != nil || m["a"] != "b" {
		t.Errorf("Scan of bytes = %v, %v", err, m)
	}
	if err := (JSONColumn{V: &m}).Scan(`{"c":"d"}`); err != nil || m["c"] != "d" {
		t.Errorf("Scan of text = %v, %v", err, m)
	}
	if err := (JSONColumn{V: &m}).Scan(42); err == nil {
		t.Error("Scan of an int: no error")
	}
}

func TestClipErrorStorable(t *testing.T) {
	got := ClipError("HTTP 500: \x00\xff" + strings.Repeat("é", 800))
	if strings.ContainsRune(got, 0) || !utf8.ValidString(got) || len(got) > 1000+len("…") {
		t.Errorf("ClipError: %q", got)
	}
}
