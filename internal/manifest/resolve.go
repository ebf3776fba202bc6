package manifest

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// This file reproduces the plain-scalar resolution of go.yaml.in/yaml/v2
// (resolve.go), which sigs.k8s.io/yaml and thus kubectl use, so that a
// manifest means the same thing here as it does to Kubernetes tooling.

var resolveHint [256]byte

var resolveMap = map[string]any{}

// mergeMarker is what the plain scalar "<<" resolves to; as a value (not a
// key) it is just the string "<<".
const mergeMarker = "<<"

func init() {
	resolveHint['+'] = 'S'
	resolveHint['-'] = 'S'
	for _, c := range "0123456789" {
		resolveHint[c] = 'D'
	}
	for _, c := range "yYnNtTfFoO~" {
		resolveHint[c] = 'M'
	}
	resolveHint['.'] = '.'

	for _, item := range []struct {
		v any
		l []string
	}{
		{true, []string{"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}},
		{false, []string{"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}},
		{nil, []string{"", "~", "null", "Null", "NULL"}},
		{math.NaN(), []string{".nan", ".NaN", ".NAN"}},
		{math.Inf(+1), []string{".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"}},
		{math.Inf(-1), []string{"-.inf", "-.Inf", "-.INF"}},
		{mergeMarker, []string{"<<"}},
	} {
		for _, s := range item.l {
			resolveMap[s] = item.v
		}
	}
}

var yamlStyleFloat = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

// resolve11 resolves an untagged plain scalar. It returns nil, bool, string,
// int64, uint64 (integers above MaxInt64) or float64 (possibly NaN/Inf).
func resolve11(in string) any {
	hint := byte('N')
	if in != "" {
		hint = resolveHint[in[0]]
	}
	if hint == 0 {
		return in
	}
	if v, ok := resolveMap[in]; ok {
		return v
	}
	switch hint {
	case '.':
		if f, err := strconv.ParseFloat(in, 64); err == nil {
			return f
		}
	case 'D', 'S':
		if _, ok := parseTimestamp(in); ok {
			return in // timestamps stay strings, as with sigs.k8s.io/yaml
		}
		plain := strings.ReplaceAll(in, "_", "")
		if i, err := strconv.ParseInt(plain, 0, 64); err == nil {
			return i
		}
		if u, err := strconv.ParseUint(plain, 0, 64); err == nil {
			return u
		}
		if yamlStyleFloat.MatchString(plain) {
			if f, err := strconv.ParseFloat(plain, 64); err == nil {
				return f
			}
		}
		if rest, ok := strings.CutPrefix(plain, "0b"); ok {
			if i, err := strconv.ParseInt(rest, 2, 64); err == nil {
				return i
			}
			if u, err := strconv.ParseUint(rest, 2, 64); err == nil {
				return u
			}
		} else if rest, ok := strings.CutPrefix(plain, "-0b"); ok {
			if i, err := strconv.ParseInt("-"+rest, 2, 64); err == nil {
				return i
			}
		}
	}
	return in
}

// Timestamp formats recognised by go-yaml v2.
var timestampFormats = []string{
	"2006-1-2T15:4:5.999999999Z07:00",
	"2006-1-2t15:4:5.999999999Z07:00",
	"2006-1-2 15:4:5.999999999",
	"2006-1-2",
}

func parseTimestamp(s string) (time.Time, bool) {
	i := 0
	for ; i < len(s); i++ {
		if c := s[i]; c < '0' || c > '9' {
			break
		}
	}
	if i != 4 || i == len(s) || s[i] != '-' {
		return time.Time{}, false
	}
	for _, format := range timestampFormats {
		if t, err := time.Parse(format, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// normalizeFloat applies the package's numeric convention to a float: an
// integral value within the int64 range becomes int64, any other finite value
// stays float64. ok is false for NaN and infinities.
func normalizeFloat(f float64) (v any, ok bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, false
	}
	if f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 {
		return int64(f), true
	}
	return f, true
}
