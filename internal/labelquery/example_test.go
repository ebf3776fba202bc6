package labelquery_test

import (
	"fmt"

	"github.com/drover-dev/drover/internal/labelquery"
)

func Example() {
	runtimes := []struct {
		name   string
		labels labelquery.Labels
	}{
		{"prod-startup", labelquery.Labels{"@type": "runtime", "env": "production", "tier": "startup"}},
		{"prod-teams", labelquery.Labels{"@type": "runtime", "env": "production", "tier": "teams"}},
		{"prod-enterprise", labelquery.Labels{"@type": "runtime", "env": "production", "tier": "enterprise"}},
		{"staging", labelquery.Labels{"@type": "runtime", "env": "staging"}},
	}
	labels := make([]labelquery.Labels, len(runtimes))
	for i, r := range runtimes {
		labels[i] = r.labels
	}

	q, err := labelquery.Parse("env=production (tier=startup +tier=teams)")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, i := range q.Select(labels) {
		fmt.Println(runtimes[i].name)
	}
	fmt.Println(q.Keys())

	// Without parentheses the terms fold left to right:
	// (env=production AND tier=startup) OR tier=teams.
	fmt.Println(labelquery.MustParse("env=production tier=startup +tier=teams").Select(labels))

	_, err = labelquery.Parse("env=production (tier=startup")
	fmt.Println(err)
	// Output:
	// prod-startup
	// prod-teams
	// [env tier]
	// [0 1]
	// label query "env=production (tier=startup": offset 15: unclosed "(": expected ")" before end of query
}
