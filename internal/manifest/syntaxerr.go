package manifest

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// yaml.v3 reports syntax errors as "yaml: line N: problem", where N is the
// line of the construct being parsed (sometimes the line before it, and
// absent on the first line), and never a column. syntaxError keeps the
// problem text and finds the offending character itself: parsing stops at
// the first problem, so the shortest prefix of data that fails with the same
// problem ends right at it, and a binary search over prefix lengths finds it
// with a few dozen parses.
//
// A truncated prefix can also fail just because it ends early (an open flow
// collection "[1, 2" fails with the same "did not find expected ',' or ']'"
// as "[1 2]"). To tell those apart, a prefix only counts if it still fails
// the same way when completed: with its open flow collections closed, and
// with a ":" added (for "could not find expected ':'").

var yamlErrLine = regexp.MustCompile(`^line (\d+): `)

// locateLimit is the largest input whose errors are located to the
// character; for larger ones the line yaml.v3 reports is used.
const locateLimit = 1 << 20

// eofProblem is the problem reported for unterminated quoted scalars, where
// the end of the input really is the cause.
const eofProblem = "found unexpected end of stream"

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
	if len(data) > locateLimit {
		return hintPosition(data, hintLine)
	}
	plain := func(k int) bool { return problemOf(data[:k]) == problem }
	completed := func(k int) bool {
		if !plain(k) {
			return false
		}
		for _, c := range completions(data[:k], problem) {
			buf := make([]byte, 0, k+len(c))
			buf = append(append(buf, data[:k]...), c...)
			if problemOf(buf) != problem {
				return false
			}
		}
		return true
	}
	fails := completed
	if problem == eofProblem || !completed(len(data)) {
		// The end of the input is (part of) the problem: the answer is the
		// shortest prefix that fails at its end, e.g. an opening quote.
		fails = plain
	}
	// Narrow [lo, hi] around the reported line first: usually the problem is
	// on it or a few lines below it.
	lo, hi := 0, len(data) // fails(lo) is false, fails(hi) is true
	if hintLine > 0 {
		ends := lineEnds(data)
		if a := hintLine - 3; a >= 0 && a < len(ends) && !fails(ends[a]) {
			lo = ends[a]
			for step, l := 1, hintLine-1; l < len(ends); step, l = step*2, l+step {
				if fails(ends[l]) {
					hi = ends[l]
					break
				}
				lo = ends[l]
			}
		}
	}
	// The first k in (lo, hi], at a character boundary, for which fails(k).
	k := lo + 1 + sort.Search(hi-lo, func(i int) bool {
		k := lo + i + 1
		for k < len(data) && !utf8.RuneStart(data[k]) {
			k++
		}
		return fails(k)
	})
	if k > len(data) {
		return hintPosition(data, hintLine)
	}
	// The position of the last character of that prefix, or of the last
	// non-blank character before it if the prefix ends in a line break.
	off := k - 1
	for off > 0 && !utf8.RuneStart(data[off]) {
		off--
	}
	lineStart := bytes.LastIndexByte(data[:off], '\n') + 1
	if data[off] == '\n' || data[off] == '\r' {
		if text := bytes.TrimRight(data[lineStart:off], " \t\r"); len(text) > 0 {
			off = lineStart + len(text) - 1
			for off > lineStart && !utf8.RuneStart(data[off]) {
				off--
			}
		}
	}
	return bytes.Count(data[:lineStart], []byte{'\n'}) + 1, utf8.RuneCount(data[lineStart:off]) + 1
}

// lineEnds returns the offset just past each line's newline (or the end of
// data for the last line).
func lineEnds(data []byte) []int {
	var ends []int
	for i, b := range data {
		if b == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	return ends
}

// hintPosition is the fallback: the line yaml.v3 named (or 1) and its first
// non-blank column.
func hintPosition(data []byte, hintLine int) (line, col int) {
	line = max(hintLine, 1)
	start := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(data[start:], '\n')
		if i < 0 {
			line = l
			break
		}
		start += i + 1
	}
	return line, firstNonBlankColumn(data, start)
}

// completions returns texts that, appended to prefix, end it cleanly if it
// was only cut short: close open flow collections (after ending a comment),
// and supply the ":" that "could not find expected ':'" is about.
func completions(prefix []byte, problem string) []string {
	var stack []byte
	const (
		normal = iota
		single
		double
		comment
	)
	state := normal
	tokenStart := true // a quote here would start a quoted scalar
	prevSpace := true  // a '#' here would start a comment
	for i := 0; i < len(prefix); i++ {
		c := prefix[i]
		switch state {
		case comment:
			if c == '\n' {
				state, tokenStart, prevSpace = normal, true, true
			}
			continue
		case double:
			switch c {
			case '\\':
				i++
			case '"':
				state, tokenStart, prevSpace = normal, false, false
			}
			continue
		case single:
			if c == '\'' {
				if i+1 < len(prefix) && prefix[i+1] == '\'' {
					i++
				} else {
					state, tokenStart, prevSpace = normal, false, false
				}
			}
			continue
		}
		space := c == ' ' || c == '\t' || c == '\n' || c == '\r'
		switch {
		case c == '#' && prevSpace:
			state = comment
		case c == '"' && tokenStart:
			state = double
		case c == '\'' && tokenStart:
			state = single
		case (c == '[' || c == '{') && (tokenStart || len(stack) > 0):
			stack = append(stack, c)
		case (c == ']' || c == '}') && len(stack) > 0:
			stack = stack[:len(stack)-1]
		}
		prevSpace = space
		tokenStart = space || (len(stack) > 0 && (c == '[' || c == '{' || c == ',' || c == ':')) || c == '-' && i == 0
	}
	var closers []byte
	for i := len(stack) - 1; i >= 0; i-- {
		if stack[i] == '[' {
			closers = append(closers, ']')
		} else {
			closers = append(closers, '}')
		}
	}
	prefixText := ""
	if state == comment {
		prefixText = "\n"
	}
	out := []string{prefixText + " " + string(closers) + "\n"}
	if strings.Contains(problem, "expected ':'") {
		out = append(out, prefixText+": "+string(closers)+"\n")
	}
	return out
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
