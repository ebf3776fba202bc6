package config

import (
	"fmt"
	"slices"
	"strings"
)

// Ordering between services (service.dependsOn, drover's own): each entry
// names a service of the same application and, optionally, the release
// channel it must run converged in. Unknown services and channels are
// refused where they are written; a cycle is refused at the entry that
// starts it, naming where each of its other edges is written.

// ChannelDependencies returns the services release channel rc of svc waits
// for: the service's dependsOn, with rc's perReleaseChannel entries added
// (one naming a service the service's list names too replaces that entry).
// An entry without a release channel names rc.
func (svc *Service) ChannelDependencies(rc string) []ServiceDependency {
	var out []ServiceDependency
	var per []ServiceDependency
	for _, prc := range svc.PerReleaseChannel {
		if prc.ReleaseChannel == rc {
			per = prc.DependsOn
		}
	}
	for _, d := range svc.DependsOn {
		if !slices.ContainsFunc(per, func(p ServiceDependency) bool { return p.Service == d.Service }) {
			out = append(out, d)
		}
	}
	out = append(out, per...)
	for i := range out {
		if out[i].ReleaseChannel == "" {
			out[i].ReleaseChannel = rc
		}
	}
	return out
}

// serviceDependencies checks one list of dependencies of svc.
func (v *validator) serviceDependencies(src *Source, path string, svc *Service, deps []ServiceDependency, rcNames map[string]bool, groups bool) {
	others := map[string]bool{}
	for k := range v.set.Services {
		if k.Application == svc.Application && k.Service != svc.Name {
			others[k.Service] = true
		}
	}
	seen := map[string]int{}
	for i, d := range deps {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case d.Service == "":
			v.add(src, p+".service", "service is required")
		case d.Service == svc.Name:
			v.add(src, p+".service", "service %q cannot wait for itself; to order its own release channels, use a releaseChannelStable precondition", d.Service)
		case !others[d.Service]:
			v.add(src, p+".service", "application %q has no service %q%s", svc.Application, d.Service, hint(d.Service, keys(others)))
		}
		if d.ReleaseChannel != "" && !groups && !rcNames[d.ReleaseChannel] {
			v.add(src, p+".releaseChannel", "application %q has no release channel %q%s", svc.Application, d.ReleaseChannel, hint(d.ReleaseChannel, keys(rcNames)))
		}
		if prev, ok := seen[d.Service]; ok {
			v.add(src, p+".service", "service %q is listed twice (also %s[%d])", d.Service, path, prev)
		}
		seen[d.Service] = i
	}
}

// dependencyEdge is where one edge of the graph of service dependencies is
// written.
type dependencyEdge struct {
	src  *Source
	path string
}

// serviceCycles refuses a cycle of service dependencies in each
// application: the graph's nodes are (service, release channel) pairs, so
// api in prod waiting for db in staging while db in staging waits for api
// in staging is not a cycle, and db and api waiting for each other in one
// channel is.
func (v *validator) serviceCycles() {
	byApp := map[string][]ServiceKey{}
	for _, k := range v.set.ServiceKeys() {
		byApp[k.Application] = append(byApp[k.Application], k)
	}
	for _, app := range sortedKeys(byApp) {
		channels := v.channelNames(app)
		deps := map[string][]string{}
		edges := map[[2]string]dependencyEdge{}
		for _, k := range byApp[app] {
			src := v.set.Services[k]
			svc := src.File.Service
			for _, rc := range channels {
				from := k.Service + "/" + rc
				for _, d := range svc.ChannelDependencies(rc) {
					if d.Service == "" || d.Service == svc.Name {
						continue // refused where it is written
					}
					to := d.Service + "/" + d.ReleaseChannel
					deps[from] = append(deps[from], to)
					if _, ok := edges[[2]string{from, to}]; !ok {
						edges[[2]string{from, to}] = dependencyEdge{src, dependencyPath(svc, rc, d.Service)}
					}
				}
			}
		}
		cycle := findCycle(deps)
		if cycle == nil {
			continue
		}
		names := make([]string, len(cycle))
		for i, n := range cycle {
			svc, rc, _ := strings.Cut(n, "/")
			names[i] = svc + " in " + rc
			if rc == "*" {
				names[i] = svc
			}
		}
		// Every edge of the cycle is where it can be broken: each is
		// refused where it is written.
		msg := strings.Join(names, " -> ")
		for i := 0; i+1 < len(cycle); i++ {
			e := edges[[2]string{cycle[i], cycle[i+1]}]
			v.add(e.src, e.path, "services wait for each other in a cycle: %s", msg)
		}
	}
}

// channelNames are the release channels of app known before compilation,
// and "*" for those its release channel groups make (a dependency without a
// channel links "*" to "*").
func (v *validator) channelNames(app string) []string {
	var out []string
	a := v.set.ApplicationConfig(app)
	if a != nil {
		for _, rc := range a.ReleaseChannels {
			out = append(out, rc.Name)
		}
		if len(a.ReleaseChannelGroups) > 0 {
			out = append(out, "*")
		}
	}
	for _, extra := range v.set.ReleaseChannels[app] {
		out = append(out, extra.File.ReleaseChannel.Name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// dependencyPath is the field that writes svc's dependency on dep in
// release channel rc: its perReleaseChannel entry when it has one, else
// the service's.
func dependencyPath(svc *Service, rc, dep string) string {
	for i, prc := range svc.PerReleaseChannel {
		if prc.ReleaseChannel != rc {
			continue
		}
		for j, d := range prc.DependsOn {
			if d.Service == dep {
				return fmt.Sprintf("service.perReleaseChannel[%d].dependsOn[%d]", i, j)
			}
		}
	}
	for j, d := range svc.DependsOn {
		if d.Service == dep {
			return fmt.Sprintf("service.dependsOn[%d]", j)
		}
	}
	return "service.dependsOn"
}
