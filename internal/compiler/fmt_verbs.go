package compiler

import (
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode/utf8"

	"github.com/drover-dev/drover/internal/config"
)

// printf accepts only the verbs fmt documents (S19). fmt prints a value
// under a verb it does not accept for it as "%!w(TYPE=VALUE)", and for %w
// (outside fmt.Errorf) it prints VALUE without calling the Format or String
// methods of the values inside it: {{printf "%w" $}} printed the fields of
// a Secret, its raw value among them. Other unknown verbs reach Format, but
// their output is never what the author meant, so they are refused alike:
// when the format is a constant, as the template is parsed; otherwise when
// printf runs.

// fmtVerbs are the verbs of the fmt package's documentation.
const fmtVerbs = "vTtbcdoOqxXUeEfFgGsp%"

// unknownVerb returns the first verb of format that fmt does not know,
// reading the format the way fmt.Sprintf does (flags, [n] argument indexes,
// widths and precisions, * taken from an argument). Where a verb falls
// does not depend on the arguments.
func unknownVerb(format string) (rune, bool) {
	end := len(format)
	for i := 0; i < end; {
		for i < end && format[i] != '%' {
			i++
		}
		if i >= end {
			break
		}
		i++ // the '%'
		for i < end && strings.IndexByte("#0+- ", format[i]) >= 0 {
			i++
		}
		var afterIndex bool
		_, i, afterIndex, _ = fmtArgNumber(0, format, i, 0, false)
		if i < end && format[i] == '*' {
			i++
			afterIndex = false
		} else {
			_, _, i = fmtParsenum(format, i, end)
		}
		if i+1 < end && format[i] == '.' {
			i++
			_, i, afterIndex, _ = fmtArgNumber(0, format, i, 0, false)
			if i < end && format[i] == '*' {
				i++
				afterIndex = false
			} else {
				_, _, i = fmtParsenum(format, i, end)
			}
		}
		if !afterIndex {
			_, i, _, _ = fmtArgNumber(0, format, i, 0, false)
		}
		if i >= end {
			break // %!(NOVERB): nothing of an argument is printed
		}
		verb, size := utf8.DecodeRuneInString(format[i:])
		i += size
		if verb == utf8.RuneError || !strings.ContainsRune(fmtVerbs, verb) {
			return verb, true
		}
	}
	return 0, false
}

// checkFormat refuses a printf format with a verb fmt does not know.
func checkFormat(format string) error {
	verb, bad := unknownVerb(format)
	if !bad {
		return nil
	}
	hint := "use one of %v %s %q %d %x %f (see the fmt package)"
	if verb == 'w' {
		hint = "%w wraps errors in Go code and has no use in a template; use %v"
	}
	return fmt.Errorf("printf format %q has the verb %%%s, which printf does not support: %s", config.Clip(format), string(verb), hint)
}

// checkFormats refuses, in every tree of a parsed template, a call to printf
// whose format is a constant with a verb fmt does not know; the error names
// the template and the line, as a parse error does.
func checkFormats(t *template.Template) error {
	for _, tt := range t.Templates() {
		if tt.Tree == nil || tt.Root == nil {
			continue
		}
		if err := checkFormatsIn(tt.Tree, tt.Root); err != nil {
			return err
		}
	}
	return nil
}

func checkFormatsIn(tree *parse.Tree, n parse.Node) error {
	switch x := n.(type) {
	case *parse.ListNode:
		if x == nil {
			return nil
		}
		for _, c := range x.Nodes {
			if err := checkFormatsIn(tree, c); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		return checkFormatsIn(tree, x.Pipe)
	case *parse.TemplateNode:
		return checkFormatsIn(tree, x.Pipe)
	case *parse.IfNode:
		return checkFormatsBranch(tree, &x.BranchNode)
	case *parse.WithNode:
		return checkFormatsBranch(tree, &x.BranchNode)
	case *parse.RangeNode:
		return checkFormatsBranch(tree, &x.BranchNode)
	case *parse.PipeNode:
		if x == nil {
			return nil
		}
		for _, cmd := range x.Cmds {
			if fn, ok := cmd.Args[0].(*parse.IdentifierNode); ok && fn.Ident == "printf" && len(cmd.Args) > 1 {
				if s, ok := cmd.Args[1].(*parse.StringNode); ok {
					if err := checkFormat(s.Text); err != nil {
						loc, _ := tree.ErrorContext(s)
						return fmt.Errorf("template: %s: %w", loc, err)
					}
				}
			}
			for _, arg := range cmd.Args {
				switch a := arg.(type) {
				case *parse.PipeNode:
					if err := checkFormatsIn(tree, a); err != nil {
						return err
					}
				case *parse.ChainNode:
					if err := checkFormatsIn(tree, a.Node); err != nil {
						return err
					}
				default:
				}
			}
		}
	default:
	}
	return nil
}

func checkFormatsBranch(tree *parse.Tree, b *parse.BranchNode) error {
	if err := checkFormatsIn(tree, b.Pipe); err != nil {
		return err
	}
	if err := checkFormatsIn(tree, b.List); err != nil {
		return err
	}
	return checkFormatsIn(tree, b.ElseList)
}
