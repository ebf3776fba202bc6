package compiler

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/drover-dev/drover/internal/config"
)

var validNameRE = regexp.MustCompile(`^[a-z]([a-z0-9-]*[a-z0-9])?$`)

func validName(s string) bool { return validNameRE.MatchString(s) }

func dedupe(s []string) []string {
	seen := map[string]bool{}
	out := s[:0]
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortStrings(s []string) { sort.Strings(s) }

func nameSuggestion(name string, candidates []string) string {
	best, bestDist := "", 1<<30
	// A huge input is not a typo of a name, and its edit distance is costly.
	for _, c := range candidates {
		if len(name) > config.MaxEcho {
			break
		}
		if d := distance(name, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best != "" && bestDist <= max(2, len(name)/3) {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	if len(candidates) > 0 && len(candidates) <= 10 {
		return " (release channels: " + strings.Join(candidates, ", ") + ")"
	}
	return ""
}

func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
