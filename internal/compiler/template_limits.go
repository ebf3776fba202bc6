package compiler

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"text/template"
	"text/template/parse"
	"time"
)

// Limits of one template render. A template is user input that the server
// runs inside a request (configs:apply validates every template), so it must
// not be able to take the process's memory or its CPU for long.
//
// text/template cannot be interrupted from outside, so the limits are checked
// from inside the execution:
//   - Output goes to a capped writer: once MaxTemplateOutput bytes were
//     written the next write fails, and a failing write ends the execution.
//     That stops every loop that produces output.
//   - Loops that produce nothing ({{range 100000000000}}{{end}}, nested
//     ranges, recursive {{template}} calls) are stopped by a step counter:
//     after parsing, the parse tree is rewritten so that every range body,
//     every template body and every action starts with a call to a hidden
//     function (tickFunc). Each call counts one step and checks the render's
//     context, whose deadline is MaxTemplateTime (or the caller's, when
//     earlier: the server's request context is cancelled when its client
//     leaves). A function that returns an error ends the execution, so the
//     template stops after at most MaxTemplateSteps steps or at the deadline,
//     whichever comes first. Users cannot call the hidden function: it is not
//     defined when their text is parsed.
//   - Values built without writing ({{$x = printf "%s%s" $x $x}} in a loop)
//     grow only through the string functions; printf, print, println, html,
//     js and urlquery are replaced by versions that refuse a result larger
//     than MaxTemplateOutput. They refuse before formatting, from a bound of
//     the result computed from the format and the arguments (fmt_bound.go):
//     fmt builds the whole string before returning it.
//   - A compilation renders many templates (every templated field, file and
//     release channel group, for every release channel) and keeps their
//     results: all of them share one budget of MaxCompileOutput bytes,
//     charged with every byte written and every value a string function
//     builds, and one deadline, MaxCompileTime.
//
// These are package settings so that every caller (validate, compile, the
// server) gets the same limits.
var (
	// MaxTemplateOutput is the most one template may render, in bytes.
	MaxTemplateOutput = 16 << 20
	// MaxTemplateSteps is the most actions and loop iterations one template
	// render may execute.
	MaxTemplateSteps = 1_000_000
	// MaxTemplateTime is how long one template render may run.
	MaxTemplateTime = 10 * time.Second
	// MaxCompileOutput is the most the templates of one compilation may
	// produce together, in bytes: every byte they write and every value
	// printf, print, println, html, js and urlquery build.
	MaxCompileOutput = 64 << 20
)

// tickFunc is the hidden function inserted into parse trees; its name cannot
// be written by users (it is not defined when their text is parsed).
const tickFunc = "droverStep"

// LimitError is a template stopped by one of its limits.
type LimitError struct {
	// Line is the line (1-based, within the template text) of the action or
	// loop that was running, 0 when unknown.
	Line int
	// Reason says which limit was reached.
	Reason string
	// Err is the context error when the render was cancelled or timed out.
	Err error
}

func (e *LimitError) Error() string { return "template stopped: " + e.Reason }

func (e *LimitError) Unwrap() error { return e.Err }

// outputBudget is what the templates of one compilation may still produce
// (MaxCompileOutput); the renders of a compilation run in parallel.
type outputBudget struct{ used atomic.Int64 }

// take charges n bytes and reports whether they fit.
func (b *outputBudget) take(n int) bool {
	return b.used.Add(int64(n)) <= int64(MaxCompileOutput)
}

// left is how many bytes may still be charged.
func (b *outputBudget) left() int {
	return max(0, MaxCompileOutput-int(b.used.Load()))
}

// renderState is the bookkeeping of one render.
type renderState struct {
	ctx context.Context
	// deadline is the render's own deadline (MaxTemplateTime); ctx may end
	// earlier, at the compilation's deadline or when the caller gives up.
	deadline time.Time
	budget   *outputBudget
	steps    int
	line     int
	err      *LimitError
	// secrets are the raw secret parameters that print as sentinels in
	// this render, secretNames the names of the data's secrets, and
	// secretErr the first secret passed to a function (template_secrets.go).
	secrets     *renderSecrets
	secretNames map[Secret]string
	secretErr   *SecretError
}

// fail records the first limit reached and returns it.
func (s *renderState) fail(reason string, err error) error {
	if s.err == nil {
		s.err = &LimitError{Line: s.line, Reason: reason, Err: err}
	}
	return s.err
}

func (s *renderState) step(line int) (string, error) {
	if line > 0 {
		s.line = line
	}
	s.steps++
	if s.steps > MaxTemplateSteps {
		return "", s.fail(fmt.Sprintf("it ran more than %d steps (actions and loop iterations); a loop is too long", MaxTemplateSteps), nil)
	}
	if err := s.ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			if time.Now().Before(s.deadline) {
				return "", s.fail(fmt.Sprintf("the compilation ran out of time (its templates share at most %s)", MaxCompileTime), err)
			}
			return "", s.fail(fmt.Sprintf("it ran longer than %s", MaxTemplateTime), err)
		}
		return "", s.fail("the request was cancelled", err)
	}
	return "", nil
}

// budgetReason is the limit error of a compilation over MaxCompileOutput.
func budgetReason() string {
	return fmt.Sprintf("the templates of this compilation produced more than %s together", byteSize(MaxCompileOutput))
}

// limit is the most a value built now may take.
func (s *renderState) limit() int { return min(MaxTemplateOutput, s.budget.left()) }

// room refuses a value before it is built when bound, an upper bound of its
// size, passes the output limit or the compilation's budget.
func (s *renderState) room(bound int) error {
	switch {
	case bound > MaxTemplateOutput:
		return s.fail(fmt.Sprintf("a value would be larger than %s", byteSize(MaxTemplateOutput)), nil)
	case bound > s.budget.left():
		return s.fail(budgetReason(), nil)
	}
	return nil
}

// checkSize refuses a string larger than the output limit and charges it to
// the compilation's budget.
func (s *renderState) checkSize(out string) (string, error) {
	if len(out) > MaxTemplateOutput {
		return "", s.fail(fmt.Sprintf("a value is larger than %s", byteSize(MaxTemplateOutput)), nil)
	}
	if !s.budget.take(len(out)) {
		return "", s.fail(budgetReason(), nil)
	}
	return out, nil
}

// Escaping multiplies a byte by at most: html "&#34;", js "\u003C", urlquery "%3C".
const (
	htmlGrowth     = 5
	jsGrowth       = 6
	urlqueryGrowth = 3
)

// funcs are the render's hidden step function and the size-checked string
// functions that replace text/template's builtins of the same names. Each
// refuses a call whose result could pass the limits before building it.
func (s *renderState) funcs() template.FuncMap {
	return template.FuncMap{
		tickFunc:      s.step,
		secretArgFunc: s.secretArg,
		"printf": func(f string, a ...any) (string, error) {
			if err := checkFormat(f); err != nil {
				return "", err
			}
			if err := s.room(sprintfBound(f, a, s.limit())); err != nil {
				return "", err
			}
			return s.checkSize(fmt.Sprintf(f, a...))
		},
		"print": func(a ...any) (string, error) {
			if err := s.room(sprintBound(a, s.limit())); err != nil {
				return "", err
			}
			return s.checkSize(fmt.Sprint(a...))
		},
		"println": func(a ...any) (string, error) {
			if err := s.room(sprintBound(a, s.limit())); err != nil {
				return "", err
			}
			return s.checkSize(fmt.Sprintln(a...))
		},
		"html": func(a ...any) (string, error) {
			if err := s.room(escapeBound(a, htmlGrowth, s.limit())); err != nil {
				return "", err
			}
			return s.checkSize(template.HTMLEscaper(a...))
		},
		"js": func(a ...any) (string, error) {
			if err := s.room(escapeBound(a, jsGrowth, s.limit())); err != nil {
				return "", err
			}
			return s.checkSize(template.JSEscaper(a...))
		},
		"urlquery": func(a ...any) (string, error) {
			if err := s.room(escapeBound(a, urlqueryGrowth, s.limit())); err != nil {
				return "", err
			}
			return s.checkSize(template.URLQueryEscaper(a...))
		},
	}
}

// cappedWriter appends to a buffer and fails once the output limit is passed.
type cappedWriter struct {
	s   *renderState
	buf []byte
}

func (w *cappedWriter) Write(p []byte) (int, error) {
	if len(w.buf)+len(p) > MaxTemplateOutput {
		return 0, w.s.fail(fmt.Sprintf("its output is larger than %s", byteSize(MaxTemplateOutput)), nil)
	}
	if !w.s.budget.take(len(p)) {
		return 0, w.s.fail(budgetReason(), nil)
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// instrument rewrites every tree of t so that each template body, each range
// body and each action starts with a step (see Limits above).
func instrument(t *template.Template) {
	for _, tt := range t.Templates() {
		if tt.Tree == nil || tt.Root == nil {
			continue
		}
		instrumentSecrets(tt.Tree, tt.Root)
		instrumentList(tt.Tree, tt.Root, tt.Root.Pos, 1)
	}
}

func instrumentList(tree *parse.Tree, l *parse.ListNode, pos parse.Pos, line int) {
	if l == nil {
		return
	}
	nodes := make([]parse.Node, 0, 2*len(l.Nodes)+1)
	nodes = append(nodes, stepNode(tree, pos, line))
	for _, n := range l.Nodes {
		switch x := n.(type) {
		case *parse.ActionNode:
			nodes = append(nodes, stepNode(tree, x.Pos, x.Line))
		case *parse.TemplateNode:
			nodes = append(nodes, stepNode(tree, x.Pos, x.Line))
		case *parse.IfNode:
			instrumentBranch(tree, &x.BranchNode)
		case *parse.WithNode:
			instrumentBranch(tree, &x.BranchNode)
		case *parse.RangeNode:
			// The pipeline is evaluated once, before the loop; the body
			// starts with a step, so every iteration counts.
			nodes = append(nodes, stepNode(tree, x.Pos, x.Line))
			instrumentBranch(tree, &x.BranchNode)
		}
		nodes = append(nodes, n)
	}
	l.Nodes = nodes
}

func instrumentBranch(tree *parse.Tree, b *parse.BranchNode) {
	if b.List == nil {
		b.List = &parse.ListNode{NodeType: parse.NodeList, Pos: b.Pos}
	}
	instrumentList(tree, b.List, b.Pos, b.Line)
	instrumentList(tree, b.ElseList, b.Pos, b.Line)
}

// stepNode is the action {{droverStep LINE}}; it prints nothing.
func stepNode(tree *parse.Tree, pos parse.Pos, line int) *parse.ActionNode {
	ident := parse.NewIdentifier(tickFunc).SetTree(tree).SetPos(pos)
	num := &parse.NumberNode{NodeType: parse.NodeNumber, Pos: pos, IsInt: true, Int64: int64(line), Text: strconv.Itoa(line)}
	cmd := &parse.CommandNode{NodeType: parse.NodeCommand, Pos: pos, Args: []parse.Node{ident, num}}
	pipe := &parse.PipeNode{NodeType: parse.NodePipe, Pos: pos, Line: line, Cmds: []*parse.CommandNode{cmd}}
	return &parse.ActionNode{NodeType: parse.NodeAction, Pos: pos, Line: line, Pipe: pipe}
}

// execute runs an instrumented template with the limits, charging its output
// to budget (a new one when nil); the context bounds it further.
func execute(ctx context.Context, t *template.Template, data any, budget *outputBudget) (string, error) {
	deadline := time.Now().Add(MaxTemplateTime)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if budget == nil {
		budget = &outputBudget{}
	}
	st := &renderState{ctx: ctx, deadline: deadline, budget: budget, secretNames: secretNames(data)}
	if d, ok := data.(*Data); ok {
		st.secrets = d.secrets
	}
	// The parsed template is shared (cached per compilation); each render
	// gets a clone with its own functions bound to its own state.
	run, err := t.Clone()
	if err != nil {
		return "", err
	}
	run.Funcs(st.funcs())
	w := &cappedWriter{s: st}
	if err := run.Execute(w, data); err != nil {
		if st.err != nil {
			return "", st.err
		}
		if st.secretErr != nil {
			return "", st.secretErr
		}
		return "", err
	}
	return string(w.buf), nil
}

// byteSize prints a size limit the way people read it.
func byteSize(n int) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
