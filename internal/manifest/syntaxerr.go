package manifest

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// yaml.v3 reports syntax errors as "yaml: line N: problem", where N is the
// line of the construct being parsed (sometimes the line before it, and
// absent on the first line), and never a column. syntaxError keeps the
// problem text and finds the position of the offending character itself:
// parsing stops at the first problem, so the shortest prefix of data that
// fails with the same problem ends right at it.

var yamlErrLine = regexp.MustCompile(`^line (\d+): `)

// locateBudget bounds the bytes re-parsed while locating one error, so that
// a syntax error in a huge file still reports quickly (with a coarser
// position).
const locateBudget = 32 << 20

func syntaxError(data []byte, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	hint := 0
	if m := yamlErrLine.FindStringSubmatch(msg); m != nil {
		hint, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	line, col := locateSyntaxError(data, msg, hint)
	return &Error{Line: line, Column: col, Msg: msg}
}

// problemOf parses all of data as a YAML stream and returns the problem text
// of the first syntax error ("" if there is none).
func problemOf(data []byte) (problem string) {
	defer func() {
		if recover() != nil {
			problem = ""
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return ""
		}
		if err != nil {
			msg := strings.TrimPrefix(err.Error(), "yaml: ")
			if m := yamlErrLine.FindStringSubmatch(msg); m != nil {
				msg = msg[len(m[0]):]
			}
			return msg
		}
	}
}

func locateSyntaxError(data []byte, problem string, hintLine int) (line, col int) {
	lineStarts := []int{0}
	for i, b := range data {
		if b == '\n' {
			lineStarts = append(lineStarts, i+1)
		}
	}
	lineEnd := func(l int) int {
		if l+1 < len(lineStarts) {
			return lineStarts[l+1]
		}
		return len(data)
	}
	// The reported line is usually at or just before the problem, but not
	// always (an unclosed quote on line 1 is reported at the end of the
	// stream), so scan forward from it, then back while earlier lines still
	// fail the same way.
	first := min(max(hintLine-1, 0), len(lineStarts)-1)
	fallback := func() (int, int) {
		l := min(max(hintLine, 1), len(lineStarts))
		return l, firstNonBlankColumn(data, lineStarts[l-1])
	}
	budget := locateBudget
	failsAt := func(end int) (fails, ok bool) {
		if budget -= end; budget < 0 {
			return false, false
		}
		return problemOf(data[:end]) == problem, true
	}

	failing := -1
	for l := first; l < len(lineStarts) && failing < 0; l++ {
		fails, ok := failsAt(lineEnd(l))
		if !ok {
			return fallback()
		}
		if fails {
			failing = l
		}
	}
	if failing < 0 {
		return fallback()
	}
	for failing > 0 {
		fails, ok := failsAt(lineEnd(failing - 1))
		if !ok || !fails {
			break
		}
		failing--
	}
	// Then the first character on that line that does.
	start, end := lineStarts[failing], lineEnd(failing)
	for k := start + 1; k <= end; k++ {
		if k < len(data) && !utf8.RuneStart(data[k]) {
			continue // only cut at character boundaries
		}
		fails, ok := failsAt(k)
		if !ok {
			break
		}
		if fails {
			// The last character of the shortest failing prefix.
			off := k - 1
			for off > start && !utf8.RuneStart(data[off]) {
				off--
			}
			return failing + 1, utf8.RuneCount(data[start:off]) + 1
		}
	}
	return failing + 1, firstNonBlankColumn(data, start)
}

func firstNonBlankColumn(data []byte, start int) int {
	i := start
	for i < len(data) && (data[i] == ' ' || data[i] == '\t') {
		i++
	}
	if i >= len(data) || data[i] == '\n' || data[i] == '\r' {
		return 1
	}
	return i - start + 1
}
