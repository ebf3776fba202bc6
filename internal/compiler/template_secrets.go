package compiler

import (
	"crypto/rand"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"text/template/parse"
)

// Secret parameters in templates (B5). A template may output a secret
// parameter only as a whole: {{.Params.token}}, also through a variable,
// {{with}} or {{template}}, which do not change it. A custom runtime then puts
// the value in place of the marker; other runtimes never see the value.
// Any function that receives one (printf, html, slice, eq, or, ... every
// function, builtin or not) fails the render: it would work on the marker
// or the reference, not on the value, and give the command a wrong value
// silently.
//
// How:
//   - After parsing, every argument of a function call that is not a
//     constant, and every value piped into a function, is wrapped in a call
//     to a hidden function (secretArgFunc, like tickFunc) that fails on a
//     secret and returns anything else unchanged.
//   - During a render of a custom runtime's commands, a raw secret parameter
//     prints as a sentinel with a random nonce (secretSentinel), not as its
//     marker, so that the hidden function also finds a secret that printf
//     or print turned into a string, and so that the output can tell the
//     secret from text that only looks like its marker. After the render,
//     the output is refused if it holds a marker written some other way
//     (it would be replaced by the value too), then each sentinel becomes
//     the marker.
//   - The formatting functions (printf, print, println, html, js, urlquery)
//     also refuse a map, slice or struct that holds a secret ({{printf "%v"
//     .Params}}); other functions may take them ({{index .Params "token"}}
//     returns the secret, which is then checked where it goes).

// secretArgFunc is the hidden function wrapped around function arguments;
// users cannot call it (it is not defined when their text is parsed).
const secretArgFunc = "droverSecretArg"

// secretSentinelPrefix starts every sentinel: prefix + nonce + ":" + name + ")".
const secretSentinelPrefix = "(drover-secret:"

// formattingFuncs print their arguments whole, nested values included.
var formattingFuncs = map[string]bool{"printf": true, "print": true, "println": true, "html": true, "js": true, "urlquery": true}

// SecretError is a template that used a secret parameter other than by
// outputting it whole.
type SecretError struct {
	// Line is the line (1-based, within the template text) of the call, 0
	// when unknown.
	Line int
	Msg  string
}

func (e *SecretError) Error() string { return e.Msg }

// renderSecrets are the raw secret parameters of one custom runtime's
// render data: they print as sentinels during the render.
type renderSecrets struct {
	nonce string
	names []string
}

// withSecretSentinels returns a copy of params in which the raw secret
// parameters print as sentinels, and their description; nil when params
// holds none.
func withSecretSentinels(params map[string]any) (map[string]any, *renderSecrets) {
	var rs *renderSecrets
	out := make(map[string]any, len(params))
	for name, v := range params {
		out[name] = v
		sec, ok := v.(Secret)
		if !ok || sec.param == "" {
			continue
		}
		if rs == nil {
			rs = &renderSecrets{nonce: rand.Text()}
		}
		rs.names = append(rs.names, name)
		sec.sentinel = rs.sentinel(name)
		out[name] = sec
	}
	if rs == nil {
		return params, nil
	}
	sortStrings(rs.names)
	return out, rs
}

func (rs *renderSecrets) sentinel(name string) string {
	return secretSentinelPrefix + rs.nonce + ":" + name + ")"
}

// finish checks a render's output and puts the markers in place of the
// sentinels.
func (rs *renderSecrets) finish(out string) (string, error) {
	if rs == nil {
		return out, nil
	}
	for _, name := range rs.names {
		if m := SecretMarker(name); strings.Contains(out, m) {
			return "", &SecretError{Msg: fmt.Sprintf("the text %q is reserved: the runtime replaces it with the value of secret parameter %q; write {{.Params.%s}} to use the secret", m, name, name)}
		}
	}
	if !strings.Contains(out, secretSentinelPrefix) {
		return out, nil
	}
	pairs := make([]string, 0, 2*len(rs.names))
	for _, name := range rs.names {
		pairs = append(pairs, rs.sentinel(name), SecretMarker(name))
	}
	return strings.NewReplacer(pairs...).Replace(out), nil
}

// inString returns the secret parameter whose sentinel s holds.
func (rs *renderSecrets) inString(s string) (string, bool) {
	if rs == nil || !strings.Contains(s, secretSentinelPrefix) {
		return "", false
	}
	for _, name := range rs.names {
		if strings.Contains(s, rs.sentinel(name)) {
			return name, true
		}
	}
	return "", false
}

// secretArg is the hidden function: it returns v unless v is a secret, or a
// string made from one; line and fn say where it was passed.
//
// Only renders of custom runtime commands check (s.secrets set): there a
// secret prints as a marker the runtime replaces with the value, so a
// function would transform the marker, not the value. Elsewhere templates
// see a reference (secret://KEY@VERSION, "(secret)") and functions may use
// it as before.
func (s *renderState) secretArg(fn string, line int, v reflect.Value) (reflect.Value, error) {
	if s.secrets == nil {
		return v, nil
	}
	budget := fmtNodeLimit
	if name, found := s.findSecret(v, formattingFuncs[fn], &budget); found {
		if line > 0 {
			s.line = line
		}
		return reflect.Value{}, s.secretFail(fn, name)
	}
	return v, nil
}

// secretFail records that a secret parameter (name, "" when unknown) was
// passed to fn.
func (s *renderState) secretFail(fn, name string) error {
	what := "a secret parameter"
	if name != "" {
		what = fmt.Sprintf("secret parameter %q", name)
	}
	msg := fmt.Sprintf("%s cannot be passed to %s: templates see only a reference to a secret, never its value", what, fn)
	if s.secrets != nil && name != "" {
		msg = fmt.Sprintf("%s cannot be passed to %s: secrets are substituted by the runtime only where the template outputs {{.Params.%s}} as is", what, fn, name)
	}
	if s.secretErr == nil {
		s.secretErr = &SecretError{Line: s.line, Msg: msg}
	}
	return s.secretErr
}

var secretType = reflect.TypeFor[Secret]()

// findSecret reports whether v is a secret or a string holding a sentinel;
// with deep, also whether a map, slice, array, struct or pointer holds one.
func (s *renderState) findSecret(v reflect.Value, deep bool, budget *int) (string, bool) {
	*budget--
	if *budget < 0 || !v.IsValid() {
		return "", false
	}
	if v.Type() == secretType {
		return s.secretName(v), true
	}
	switch v.Kind() {
	case reflect.String:
		return s.secrets.inString(v.String())
	case reflect.Interface:
		if v.IsNil() {
			return "", false
		}
		return s.findSecret(v.Elem(), deep, budget)
	case reflect.Pointer:
		if v.IsNil() {
			return "", false
		}
		return s.findSecret(v.Elem(), deep, budget)
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return s.secrets.inString(string(v.Bytes()))
		}
		if !deep {
			return "", false
		}
		for i := range v.Len() {
			if name, ok := s.findSecret(v.Index(i), deep, budget); ok {
				return name, true
			}
		}
	case reflect.Map:
		if !deep {
			return "", false
		}
		it := v.MapRange()
		for it.Next() {
			if name, ok := s.findSecret(it.Value(), deep, budget); ok {
				return name, true
			}
		}
	case reflect.Struct:
		if !deep {
			return "", false
		}
		for i := range v.NumField() {
			if name, ok := s.findSecret(v.Field(i), deep, budget); ok {
				return name, true
			}
		}
	default:
	}
	return "", false
}

// secretName is the parameter name of a secret value, "" when unknown.
func (s *renderState) secretName(v reflect.Value) string {
	if p := v.FieldByName("param").String(); p != "" {
		return p
	}
	if v.CanInterface() {
		return s.secretNames[v.Interface().(Secret)]
	}
	return ""
}

// secretNames maps the secrets of a render's parameters to their names.
func secretNames(data any) map[Secret]string {
	d, ok := data.(*Data)
	if !ok {
		return nil
	}
	var out map[Secret]string
	for name, v := range d.Params {
		if sec, ok := v.(Secret); ok {
			if out == nil {
				out = map[Secret]string{}
			}
			out[sec] = name
		}
	}
	return out
}

// instrumentSecrets wraps, in every tree of the parsed template, each
// non-constant argument of a function call and each value piped into a
// function in a call to secretArgFunc.
func instrumentSecrets(tree *parse.Tree, n parse.Node) {
	switch x := n.(type) {
	case *parse.ListNode:
		if x == nil {
			return
		}
		for _, c := range x.Nodes {
			instrumentSecrets(tree, c)
		}
	case *parse.ActionNode:
		instrumentPipe(tree, x.Pipe)
	case *parse.TemplateNode:
		instrumentPipe(tree, x.Pipe)
	case *parse.IfNode:
		instrumentBranchSecrets(tree, &x.BranchNode)
	case *parse.WithNode:
		instrumentBranchSecrets(tree, &x.BranchNode)
	case *parse.RangeNode:
		instrumentBranchSecrets(tree, &x.BranchNode)
	default:
	}
}

func instrumentBranchSecrets(tree *parse.Tree, b *parse.BranchNode) {
	instrumentPipe(tree, b.Pipe)
	instrumentSecrets(tree, b.List)
	instrumentSecrets(tree, b.ElseList)
}

func instrumentPipe(tree *parse.Tree, p *parse.PipeNode) {
	if p == nil {
		return
	}
	cmds := make([]*parse.CommandNode, 0, len(p.Cmds))
	for i, cmd := range p.Cmds {
		for _, arg := range cmd.Args {
			switch a := arg.(type) {
			case *parse.PipeNode:
				instrumentPipe(tree, a)
			case *parse.ChainNode:
				if pn, ok := a.Node.(*parse.PipeNode); ok {
					instrumentPipe(tree, pn)
				}
			default:
			}
		}
		fn, ok := cmd.Args[0].(*parse.IdentifierNode)
		if !ok || fn.Ident == tickFunc || fn.Ident == secretArgFunc {
			cmds = append(cmds, cmd)
			continue
		}
		line := nodeLine(tree, fn)
		for j := 1; j < len(cmd.Args); j++ {
			switch cmd.Args[j].(type) {
			case *parse.StringNode, *parse.NumberNode, *parse.BoolNode, *parse.NilNode:
				continue
			default:
			}
			cmd.Args[j] = &parse.PipeNode{NodeType: parse.NodePipe, Pos: cmd.Args[j].Position(), Line: line,
				Cmds: []*parse.CommandNode{secretCheck(tree, cmd.Args[j].Position(), fn.Ident, line, cmd.Args[j])}}
		}
		if i > 0 {
			// The previous command's value is passed as the last argument.
			cmds = append(cmds, secretCheck(tree, cmd.Pos, fn.Ident, line, nil))
		}
		cmds = append(cmds, cmd)
	}
	p.Cmds = cmds
}

// secretCheck is the command {{droverSecretArg "FN" LINE ARG}}, or without
// ARG for a piped value.
func secretCheck(tree *parse.Tree, pos parse.Pos, fn string, line int, arg parse.Node) *parse.CommandNode {
	args := []parse.Node{
		parse.NewIdentifier(secretArgFunc).SetTree(tree).SetPos(pos),
		&parse.StringNode{NodeType: parse.NodeString, Pos: pos, Quoted: strconv.Quote(fn), Text: fn},
		&parse.NumberNode{NodeType: parse.NodeNumber, Pos: pos, IsInt: true, Int64: int64(line), Text: strconv.Itoa(line)},
	}
	if arg != nil {
		args = append(args, arg)
	}
	return &parse.CommandNode{NodeType: parse.NodeCommand, Pos: pos, Args: args}
}

// nodeLine is the line of n in its template text, 0 when unknown.
func nodeLine(tree *parse.Tree, n parse.Node) int {
	loc, _ := tree.ErrorContext(n)
	// loc is "NAME:LINE:COL"; NAME may hold colons.
	i := strings.LastIndexByte(loc, ':')
	if i < 0 {
		return 0
	}
	j := strings.LastIndexByte(loc[:i], ':')
	line, err := strconv.Atoi(loc[j+1 : i])
	if err != nil {
		return 0
	}
	return line
}
