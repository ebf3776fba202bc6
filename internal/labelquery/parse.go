package labelquery

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxDepth bounds group nesting so that hostile input cannot exhaust the
// stack; real selectors rarely nest more than two levels.
const maxDepth = 100

type parser struct {
	src   string
	pos   int
	depth int
}

func (p *parser) eof() bool  { return p.pos >= len(p.src) }
func (p *parser) peek() byte { return p.src[p.pos] }

func (p *parser) skipSpace() {
	for !p.eof() && isSpace(p.peek()) {
		p.pos++
	}
}

func (p *parser) errorf(offset int, format string, args ...any) *SyntaxError {
	return &SyntaxError{Query: p.src, Offset: offset, Msg: fmt.Sprintf(format, args...)}
}

// found describes what sits at offset, for "expected X, found Y" messages.
func (p *parser) found(offset int) string {
	if offset >= len(p.src) {
		return "end of query"
	}
	if isSpace(p.src[offset]) {
		return "whitespace"
	}
	r, size := utf8.DecodeRuneInString(p.src[offset:])
	if r == utf8.RuneError && size == 1 {
		return fmt.Sprintf("byte %#x", p.src[offset])
	}
	return fmt.Sprintf("%+q", string(r))
}

// parseGroup parses terms up to the end of input (open < 0, the top level)
// or up to, but not including, the ")" matching the "(" at offset open.
func (p *parser) parseGroup(open int) (*group, error) {
	g := &group{}
	for {
		p.skipSpace()
		if p.eof() {
			if open >= 0 {
				return nil, p.errorf(open, `unclosed "(": expected ")" before end of query`)
			}
			break
		}
		if p.peek() == ')' {
			if open < 0 {
				return nil, p.errorf(p.pos, `unexpected ")" without a matching "("`)
			}
			break
		}

		start := p.pos
		o := opAnd
		switch p.peek() {
		case '+':
			o = opOr
			p.pos++
		case '-':
			o = opDiff
			p.pos++
		}
		if o != opAnd {
			opText := p.src[start:p.pos]
			if p.eof() || isSpace(p.peek()) || p.peek() == ')' {
				return nil, p.errorf(p.pos, "expected a label term right after %q, found %s", opText, p.found(p.pos))
			}
			if o == opDiff && len(g.terms) == 0 {
				return nil, p.errorf(start, `"-" at the start of a group has nothing to subtract from and would match nothing; `+
					`put a term before it (e.g. "@type=runtime -env=prod") or use key!=value`)
			}
		}

		n, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		if !p.eof() && !isSpace(p.peek()) && p.peek() != ')' {
			return nil, p.errorf(p.pos, "unexpected %s after term; separate terms with whitespace", p.found(p.pos))
		}

		if len(g.terms) == 0 {
			// A group in first position folds exactly as if its terms were
			// spliced in, so flatten it; this keeps String canonical.
			if sub, ok := n.(*group); ok {
				g.terms = append(g.terms, sub.terms...)
				continue
			}
			o = opAnd
		}
		g.terms = append(g.terms, term{op: o, node: n})
	}
	if len(g.terms) == 0 {
		return nil, p.errorf(open, `empty group "()": expected a label term inside the parentheses`)
	}
	return g, nil
}

func (p *parser) parsePrimary() (node, error) {
	if p.peek() != '(' {
		return p.parseAtom()
	}
	if p.depth >= maxDepth {
		return nil, p.errorf(p.pos, "groups nested more than %d deep", maxDepth)
	}
	open := p.pos
	p.pos++
	p.depth++
	g, err := p.parseGroup(open)
	p.depth--
	if err != nil {
		return nil, err
	}
	p.pos++ // the ")" that parseGroup stopped at
	if len(g.terms) == 1 {
		return g.terms[0].node, nil
	}
	return g, nil
}

func (p *parser) parseAtom() (node, error) {
	start := p.pos
	if c := p.peek(); c != '+' && c != '-' {
		p.scanWord()
	}
	key := p.src[start:p.pos]
	if key == "" {
		switch {
		case p.peek() == '=':
			return nil, p.errorf(p.pos, `expected a label key before "="`)
		case strings.HasPrefix(p.src[p.pos:], "!="):
			return nil, p.errorf(p.pos, `expected a label key before "!="`)
		case p.peek() == '"':
			return nil, p.errorf(p.pos, "expected a label key, found %s; only values may be quoted", p.found(p.pos))
		default:
			return nil, p.errorf(p.pos, `expected a label key or "(", found %s`, p.found(p.pos))
		}
	}

	a := &atom{kind: atomExists, key: key}
	if p.eof() {
		return a, nil
	}
	switch {
	case p.peek() == '=':
		a.kind = atomEqual
		p.pos++
	case strings.HasPrefix(p.src[p.pos:], "!="):
		a.kind = atomNotEqual
		p.pos += 2
	case p.peek() == '!':
		return nil, p.errorf(p.pos, `expected "!=" after label key %q, found %s`, key, p.found(p.pos))
	default:
		return a, nil
	}

	if !p.eof() && p.peek() == '"' {
		v, err := p.parseQuoted()
		if err != nil {
			return nil, err
		}
		a.value = v
		return a, nil
	}
	// Unlike a key, a value may start with "+" or "-": right after "=" they
	// cannot be operators.
	vstart := p.pos
	p.scanWord()
	if p.pos == vstart {
		opText := "="
		if a.kind == atomNotEqual {
			opText = "!="
		}
		return nil, p.errorf(p.pos, `expected a value after %q, found %s; to match an empty value write %s%s""`,
			opText, p.found(p.pos), key, opText)
	}
	a.value = p.src[vstart:p.pos]
	return a, nil
}

func (p *parser) scanWord() {
	for !p.eof() && isLabelChar(p.peek()) {
		p.pos++
	}
}

func (p *parser) parseQuoted() (string, error) {
	open := p.pos
	p.pos++
	var b strings.Builder
	for !p.eof() {
		c := p.peek()
		switch c {
		case '"':
			p.pos++
			return b.String(), nil
		case '\\':
			if p.pos+1 >= len(p.src) {
				return "", p.errorf(open, "unterminated quoted value: expected a closing double quote")
			}
			if next := p.src[p.pos+1]; next != '"' && next != '\\' {
				return "", p.errorf(p.pos, `invalid escape in quoted value: only \" and \\ are allowed after a backslash`)
			}
			b.WriteByte(p.src[p.pos+1])
			p.pos += 2
		default:
			b.WriteByte(c)
			p.pos++
		}
	}
	return "", p.errorf(open, "unterminated quoted value: expected a closing double quote")
}
