package server

import (
	"fmt"
	"testing"
)

// TestTakeService: the records of each service are split off a list sorted
// by application and service, skipping services not asked for.
func TestTakeService(t *testing.T) {
	t.Parallel()
	type rec struct{ app, svc, rc string }
	list := []rec{{"a", "x", "1"}, {"a", "y", "1"}, {"a", "y", "2"}, {"b", "x", "1"}, {"c", "z", "1"}}
	key := func(r rec) (string, string) { return r.app, r.svc }
	var got []string
	rest := list
	for _, svc := range [][2]string{{"a", "y"}, {"b", "w"}, {"b", "x"}, {"c", "z"}, {"d", "a"}} {
		var mine []rec
		rest, mine = takeService(rest, svc[0], svc[1], key)
		got = append(got, fmt.Sprint(svc, mine))
	}
	want := "[[a y] [{a y 1} {a y 2}] [b w] [] [b x] [{b x 1}] [c z] [{c z 1}] [d a] []]"
	if fmt.Sprint(got) != want {
		t.Errorf("got  %v\nwant %s", got, want)
	}
	if len(rest) != 0 {
		t.Errorf("left %v", rest)
	}
}
