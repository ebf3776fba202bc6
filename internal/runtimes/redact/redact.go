// Package redact hides raw secret values in what runtimes' commands print.
//
// A command may print a secret as it is, or encoded: a JSON encoder writes
// `p"w` as `p\"w`, Go's escapes `<` as `\u003c`, an ASCII-only one writes
// `é` as `\u00e9` (or `\u00E9`), PHP's writes `/` as `\/`, and terraform
// (HCL) writes `${` as `$${`. Text replaces the secret in each of these
// forms, so raw output can be recorded; a program that decodes the output
// must also pass every decoded string through Field, because the decoder
// turns any escaped form (a mix of them included) back into the secret.
//
// Secrets shorter than MinTextLen bytes are not replaced inside text:
// replacing every "ab" would garble the output and point at the value
// instead of hiding it. Field still hides a decoded string that is exactly a
// secret, whatever its length.
package redact

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Marker replaces a secret.
const Marker = "(redacted)"

// MinTextLen is the length in bytes under which a secret is not replaced
// inside text (see the package documentation).
const MinTextLen = 4

// Redactor hides a fixed set of secrets. The zero value and nil hide nothing.
type Redactor struct {
	exact map[string]bool
	rep   *strings.Replacer
}

// New returns a Redactor for secrets; empty ones are ignored.
func New(secrets []string) *Redactor {
	r := &Redactor{exact: map[string]bool{}}
	seen := map[string]bool{}
	var forms []string
	for _, s := range secrets {
		if s == "" || r.exact[s] {
			continue
		}
		r.exact[s] = true
		if len(s) < MinTextLen {
			continue
		}
		for _, f := range Forms(s) {
			if !seen[f] {
				seen[f] = true
				forms = append(forms, f)
			}
		}
	}
	if len(forms) == 0 {
		return r
	}
	// The replacer tries its pairs in order at each position: longest
	// first, so that a secret containing another is replaced whole.
	slices.SortStableFunc(forms, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, Marker)
	}
	r.rep = strings.NewReplacer(pairs...)
	return r
}

// Text replaces in s every secret of at least MinTextLen bytes, as it is or
// in one of the encoded forms listed by Forms.
func (r *Redactor) Text(s string) string {
	if r == nil || r.rep == nil {
		return s
	}
	return r.rep.Replace(s)
}

// Field redacts a decoded string: Marker when it is exactly a secret (of
// any length), else Text(s).
func (r *Redactor) Field(s string) string {
	if r == nil {
		return s
	}
	if r.exact[s] {
		return Marker
	}
	return r.Text(s)
}

// All returns Text of each of ss (a new slice).
func (r *Redactor) All(ss []string) []string {
	out := slices.Clone(ss)
	for i := range out {
		out[i] = r.Text(out[i])
	}
	return out
}

// escaping is one way of writing a string inside a quoted literal.
type escaping struct {
	quote     bool // JSON and HCL: \" \\ and control characters
	html      bool // < > & as \u003c \u003e \u0026 (Go's encoding/json)
	extra     bool // ' + ` as \u0027 \u002b \u0060 (.NET's default encoder)
	nonASCII  bool // non-ASCII as \uXXXX (Python's ensure_ascii, PHP, .NET)
	upperHex  bool // \u00E9 rather than \u00e9
	slash     bool // / as \/ (PHP)
	templates bool // ${ and %{ as $${ and %%{ (HCL, terraform's plan)
}

// Forms returns s as it is and as the common encoders (JSON of Go,
// JavaScript, Python, PHP and .NET; HCL) write it inside a string literal,
// without duplicates.
func Forms(s string) []string {
	forms := []string{s}
	if !utf8.ValidString(s) {
		return forms // encoders would not write these bytes back as they are
	}
	for bits := range 1 << 7 {
		e := escaping{
			quote: true, html: bits&1 != 0, extra: bits&2 != 0, nonASCII: bits&4 != 0,
			upperHex: bits&8 != 0, slash: bits&16 != 0, templates: bits&32 != 0,
		}
		if bits&64 != 0 {
			e = escaping{templates: e.templates} // unquoted text, only HCL's template escapes
		}
		if f := e.apply(s); !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	return forms
}

func (e escaping) apply(s string) string {
	var b strings.Builder
	u := func(r rune) {
		format := `\u%04x`
		if e.upperHex {
			format = `\u%04X`
		}
		if r > 0xFFFF {
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&b, format+format, hi, lo)
			return
		}
		fmt.Fprintf(&b, format, r)
	}
	for i, r := range s {
		next := byte(0)
		if n := i + utf8.RuneLen(r); n < len(s) {
			next = s[n]
		}
		switch {
		case e.quote && (r == '"' || r == '\\'):
			b.WriteByte('\\')
			b.WriteRune(r)
		case e.quote && r < 0x20:
			switch r {
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			default:
				u(r)
			}
		case e.html && (r == '<' || r == '>' || r == '&'),
			e.extra && (r == '\'' || r == '+' || r == '`'),
			e.quote && (r == 0x2028 || r == 0x2029),
			e.nonASCII && r > 0x7e:
			u(r)
		case e.slash && r == '/':
			b.WriteString(`\/`)
		case e.templates && (r == '$' || r == '%') && next == '{':
			b.WriteRune(r)
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
