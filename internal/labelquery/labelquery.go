package labelquery

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Labels are the key/value labels of one runtime or release channel.
type Labels map[string]string

// ErrEmpty is returned (wrapped) by [Parse] for a query with no terms.
var ErrEmpty = errors.New("empty label query")

// SyntaxError describes why and where a query failed to parse.
type SyntaxError struct {
	Query  string // the query as given to Parse
	Offset int    // 0-based byte offset into Query
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("label query %q: offset %d: %s", e.Query, e.Offset, e.Msg)
}

// Query is a parsed label query. It is immutable and safe for concurrent
// use. The zero Query matches nothing.
type Query struct {
	root *group
	keys []string
}

// Parse parses a label query. Syntax errors are returned as *SyntaxError; a
// query holding only whitespace returns an error wrapping [ErrEmpty].
func Parse(q string) (*Query, error) {
	p := &parser{src: q}
	p.skipSpace()
	if p.eof() {
		return nil, fmt.Errorf("label query %q: %w", q, ErrEmpty)
	}
	root, err := p.parseGroup(-1)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	root.collectKeys(seen)
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return &Query{root: root, keys: keys}, nil
}

// MustParse is like [Parse] but panics on error. It is meant for tests and
// examples; configuration input should always go through Parse.
func MustParse(q string) *Query {
	query, err := Parse(q)
	if err != nil {
		panic(err)
	}
	return query
}

// Match reports whether labels l satisfy the query.
func (q *Query) Match(l Labels) bool {
	if q == nil || q.root == nil {
		return false
	}
	return q.root.match(l)
}

// Select returns the indexes of items whose labels match, in input order.
// It returns nil when nothing matches.
func (q *Query) Select(items []Labels) []int {
	var out []int
	for i, l := range items {
		if q.Match(l) {
			out = append(out, i)
		}
	}
	return out
}

// String returns the query in canonical form: single spaces between terms,
// no redundant parentheses, values quoted only when they must be.
func (q *Query) String() string {
	if q == nil || q.root == nil {
		return ""
	}
	var b strings.Builder
	q.root.writeTerms(&b)
	return b.String()
}

// Keys returns the sorted, distinct label keys the query refers to.
func (q *Query) Keys() []string {
	if q == nil {
		return nil
	}
	return slices.Clone(q.keys)
}

// node is an element of the query's syntax tree.
type node interface {
	match(Labels) bool
	write(*strings.Builder)
	collectKeys(map[string]bool)
}

type atomKind uint8

const (
	atomExists   atomKind = iota // key
	atomEqual                    // key=value
	atomNotEqual                 // key!=value
)

type atom struct {
	kind  atomKind
	key   string
	value string
}

func (a *atom) match(l Labels) bool {
	v, ok := l[a.key]
	switch a.kind {
	case atomEqual:
		return ok && v == a.value
	case atomNotEqual:
		return !ok || v != a.value
	default:
		return ok
	}
}

func (a *atom) write(b *strings.Builder) {
	b.WriteString(a.key)
	switch a.kind {
	case atomEqual:
		b.WriteByte('=')
	case atomNotEqual:
		b.WriteString("!=")
	default:
		return
	}
	writeValue(b, a.value)
}

func (a *atom) collectKeys(seen map[string]bool) { seen[a.key] = true }

type op uint8

const (
	opAnd  op = iota // whitespace
	opOr             // +
	opDiff           // -
)

type term struct {
	op   op
	node node
}

// group is a sequence of terms folded left to right. The first term's op is
// always opAnd: combining with the empty set via "+" is the identity, and a
// leading "-" is rejected by the parser.
type group struct {
	terms []term
}

func (g *group) match(l Labels) bool {
	acc := false
	for i, t := range g.terms {
		switch {
		case i == 0:
			acc = t.node.match(l)
		case t.op == opAnd:
			acc = acc && t.node.match(l)
		case t.op == opOr:
			acc = acc || t.node.match(l)
		case t.op == opDiff:
			acc = acc && !t.node.match(l)
		}
	}
	return acc
}

func (g *group) write(b *strings.Builder) {
	b.WriteByte('(')
	g.writeTerms(b)
	b.WriteByte(')')
}

func (g *group) writeTerms(b *strings.Builder) {
	for i, t := range g.terms {
		if i > 0 {
			b.WriteByte(' ')
			switch t.op {
			case opAnd:
				// whitespace alone
			case opOr:
				b.WriteByte('+')
			case opDiff:
				b.WriteByte('-')
			}
		}
		t.node.write(b)
	}
}

func (g *group) collectKeys(seen map[string]bool) {
	for _, t := range g.terms {
		t.node.collectKeys(seen)
	}
}

func writeValue(b *strings.Builder, v string) {
	if isWord(v) {
		b.WriteString(v)
		return
	}
	// Only '"' and '\' need escaping; every other byte, valid UTF-8 or not,
	// is carried verbatim so that String round-trips any parsed value.
	b.WriteByte('"')
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(v[i])
	}
	b.WriteByte('"')
}

// isWord reports whether s can be written as a bare value.
func isWord(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isLabelChar(s[i]) {
			return false
		}
	}
	return s != ""
}

func isLabelChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte(".-_@+/", c) >= 0
}

func isSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}
