package kubernetes

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/drover-dev/drover/internal/runtimes"
)

// Discover implements runtimes.Discoverer: the cluster's version and the
// API versions it serves, each group version alone and with each of its
// kinds, as Helm lists them in .Capabilities.APIVersions. A group that
// fails discovery (an aggregated API whose server is down) is left out, as
// Helm leaves it out; an answer without any group is an error.
func (r *Runtime) Discover(ctx context.Context) (runtimes.Facts, error) {
	if err := ctx.Err(); err != nil {
		return runtimes.Facts{}, fmt.Errorf("kubernetes runtime %s: discovery: %w", r.name, err)
	}
	type result struct {
		facts runtimes.Facts
		err   error
	}
	// The discovery client takes no context: run it aside and stop
	// waiting when ctx ends (its HTTP client has the runtime's timeout).
	done := make(chan result, 1)
	go func() {
		f, err := discover(r.disc)
		done <- result{f, err}
	}()
	select {
	case <-ctx.Done():
		return runtimes.Facts{}, fmt.Errorf("kubernetes runtime %s: discovery: %w", r.name, ctx.Err())
	case res := <-done:
		if res.err != nil {
			return runtimes.Facts{}, fmt.Errorf("kubernetes runtime %s: discovery: %w", r.name, res.err)
		}
		return res.facts, nil
	}
}

func discover(d discovery.DiscoveryInterface) (runtimes.Facts, error) {
	v, err := d.ServerVersion()
	if err != nil {
		return runtimes.Facts{}, fmt.Errorf("server version: %w", err)
	}
	_, lists, err := d.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return runtimes.Facts{}, fmt.Errorf("API groups: %w", err)
	}
	if len(lists) == 0 {
		return runtimes.Facts{}, fmt.Errorf("API groups: the cluster listed none")
	}
	seen := map[string]bool{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		seen[gv.String()] = true
		for _, res := range l.APIResources {
			if res.Kind != "" {
				seen[gv.String()+"/"+res.Kind] = true
			}
		}
	}
	versions := make([]string, 0, len(seen))
	for k := range seen {
		versions = append(versions, k)
	}
	slices.Sort(versions)
	return runtimes.Facts{KubeVersion: v.GitVersion, APIVersions: versions}, nil
}
