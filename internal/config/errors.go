package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrNoConfigs is returned when the given paths hold no `*.pvn.yaml` files.
var ErrNoConfigs = errors.New("no drover configs (*.pvn.yaml) found")

// Position is a 1-based line and column in a file.
type Position struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

// Error is one located problem in a config file, printed as
// FILE:LINE:COL: field.path: message.
type Error struct {
	File   string `json:"file"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
	Field  string `json:"field,omitempty"`
	Msg    string `json:"message"`
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList collects every problem found in one run.
type ErrorList []*Error

func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Err returns the list as an error, or nil when it is empty. The list is sorted
// by file, line and column, and exact duplicates are dropped.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i], l[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	out := l[:0]
	for i, e := range l {
		if i > 0 && *e == *l[i-1] {
			continue
		}
		out = append(out, e)
	}
	return out
}

// AsErrorList extracts the located errors from err, if it carries any.
func AsErrorList(err error) (ErrorList, bool) {
	var l ErrorList
	if errors.As(err, &l) {
		return l, true
	}
	var e *Error
	if errors.As(err, &e) {
		return ErrorList{e}, true
	}
	return nil, false
}
