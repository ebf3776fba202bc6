package cloudrun

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/drover-dev/drover/internal/cloudrunspec"
	"github.com/drover-dev/drover/internal/runtimes"
)

// CloudRun is what drover knows of a Cloud Run service, as one object:
// shown as the instance's runtime info (drover status, the web UI).
type CloudRun struct {
	Service            string `json:"service"`
	Project            string `json:"project"`
	Region             string `json:"region"`
	URI                string `json:"uri,omitempty"`
	Generation         int64  `json:"generation"`
	ObservedGeneration int64  `json:"observedGeneration"`
	// Ready is the terminal condition's state (SUCCEEDED, FAILED,
	// RECONCILING, PENDING), ReadyMessage its message.
	Ready                 string `json:"ready"`
	ReadyMessage          string `json:"readyMessage,omitempty"`
	LatestCreatedRevision string `json:"latestCreatedRevision,omitempty"`
	LatestReadyRevision   string `json:"latestReadyRevision,omitempty"`
	// Traffic is the traffic split as served, with the drover version of
	// each revision that serves it.
	Traffic []Traffic `json:"traffic,omitempty"`
	// Revisions are the latest created revision and those serving
	// traffic, with their readiness and version.
	Revisions []Revision `json:"revisions,omitempty"`
}

// Traffic is one traffic target as served.
type Traffic struct {
	Revision string `json:"revision"`
	Percent  int32  `json:"percent"`
	Latest   bool   `json:"latest,omitempty"`
	Tag      string `json:"tag,omitempty"`
	Version  string `json:"version,omitempty"`
}

// Revision is one revision drover looked at.
type Revision struct {
	Name     string `json:"name"`
	Ready    string `json:"ready"`
	Message  string `json:"message,omitempty"`
	Version  string `json:"version,omitempty"`
	Instance string `json:"instance,omitempty"`
	Images   string `json:"images"`
}

func stateName(c *runpb.Condition) string {
	if c == nil {
		return "PENDING"
	}
	return strings.TrimPrefix(c.State.String(), "CONDITION_")
}

// observe turns a service as read into the instance's state.
func (r *Runtime) observe(ctx context.Context, key runtimes.InstanceKey, o cloudrunspec.Object, desired, svc *runpb.Service) (runtimes.State, *CloudRun, error) {
	obj := runtimes.Object{ObjectType: ObjectType, Name: o.ServiceName, Status: runtimes.ObjectPending}
	info := &CloudRun{Service: o.ServiceName, Project: r.project, Region: r.region, URI: svc.Uri, Generation: svc.Generation,
		ObservedGeneration: svc.ObservedGeneration, Ready: stateName(svc.TerminalCondition),
		LatestCreatedRevision: short(svc.LatestCreatedRevision), LatestReadyRevision: short(svc.LatestReadyRevision)}
	if tc := svc.TerminalCondition; tc != nil {
		info.ReadyMessage = tc.Message
	}
	if why := owner(key, o, svc.Annotations); why != "" {
		return runtimes.State{Message: why, Objects: []runtimes.Object{obj}}, info, nil
	}
	// The revisions that matter: the latest created, and those serving.
	revs := map[string]*runpb.Revision{}
	get := func(short string) (*runpb.Revision, error) {
		if short == "" {
			return nil, nil
		}
		full := svc.Name + "/revisions/" + short
		if rv, ok := revs[full]; ok {
			return rv, nil
		}
		rv, err := r.revision(ctx, full)
		if err != nil {
			return nil, fmt.Errorf("read revision %s: %w", short, err)
		}
		revs[full] = rv
		return rv, nil
	}
	latest, err := get(short(svc.LatestCreatedRevision))
	if err != nil {
		return runtimes.State{}, nil, err
	}
	servingVersions := map[string]int32{}
	for _, t := range svc.TrafficStatuses {
		tr := Traffic{Revision: t.Revision, Percent: t.Percent, Tag: t.Tag,
			Latest: t.Type == runpb.TrafficTargetAllocationType_TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST}
		rv, err := get(t.Revision)
		if err != nil {
			return runtimes.State{}, nil, err
		}
		if rv != nil && rv.Annotations[cloudrunspec.AnnotationInstance] == key.String() {
			tr.Version = rv.Annotations[cloudrunspec.AnnotationVersion]
		}
		if t.Percent > 0 {
			servingVersions[tr.Version] += t.Percent
		}
		info.Traffic = append(info.Traffic, tr)
	}
	names := make([]string, 0, len(revs))
	for n := range revs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		rv := revs[n]
		c := ready(rv.Conditions)
		ri := Revision{Name: short(n), Ready: stateName(c), Instance: rv.Annotations[cloudrunspec.AnnotationInstance],
			Version: rv.Annotations[cloudrunspec.AnnotationVersion], Images: images(rv.Containers)}
		if c != nil {
			ri.Message = c.Message
		}
		info.Revisions = append(info.Revisions, ri)
	}

	st := runtimes.State{}
	latestOurs := latest != nil && latest.Annotations[cloudrunspec.AnnotationInstance] == key.String()
	switch {
	case latestOurs:
		st.Version = latest.Annotations[cloudrunspec.AnnotationVersion]
	default:
		// What serves most of the traffic, if it is ours.
		best := int32(-1)
		for v, p := range servingVersions {
			if p > best || p == best && v > st.Version {
				st.Version, best = v, p
			}
		}
		if st.Version == "" {
			st.Message = fmt.Sprintf("Cloud Run service %s runs revision %s, which drover did not deploy for %s", o.ServiceName, short(svc.LatestCreatedRevision), key)
		}
	}
	obj.Version = st.Version
	serving := servingText(info.Traffic)
	switch {
	case st.Version == "":
	case !latestOurs:
		st.Message = fmt.Sprintf("%s serving (%s); the latest revision %s is not drover's", st.Version, serving, short(svc.LatestCreatedRevision))
	case ready(latest.Conditions) == nil:
		st.Message = fmt.Sprintf("%s rolling out: revision %s is not ready yet", st.Version, short(latest.Name))
		if c := svc.TerminalCondition; c != nil && c.Message != "" {
			st.Message += " (" + c.Message + ")"
		}
	case ready(latest.Conditions).State == runpb.Condition_CONDITION_FAILED:
		st.Failed = true
		obj.Status = runtimes.ObjectFailed
		st.Message = fmt.Sprintf("%s failed: revision %s is not ready: %s", st.Version, short(latest.Name), ready(latest.Conditions).Message)
		if serving != "" {
			st.Message += "; traffic stays on " + serving
		}
	case svc.Reconciling || svc.ObservedGeneration != svc.Generation || svc.TerminalCondition == nil ||
		svc.TerminalCondition.State != runpb.Condition_CONDITION_SUCCEEDED:
		st.Message = fmt.Sprintf("%s rolling out: revision %s is ready, the service is %s", st.Version, short(latest.Name), strings.ToLower(stateName(svc.TerminalCondition)))
		if c := svc.TerminalCondition; c != nil && c.Message != "" {
			st.Message += ": " + c.Message
		}
	default:
		st.Converged = true
		obj.Status = runtimes.ObjectSucceeded
		st.Message = fmt.Sprintf("%s serving: %s", st.Version, serving)
	}
	if st.Version != "" && st.Version == desired.Annotations[cloudrunspec.AnnotationVersion] && !st.Failed {
		if diff := drift(desired, svc); diff != "" {
			st.Drifted, st.Converged = true, false
			obj.Status = runtimes.ObjectPending
			st.Message = "changed outside drover: " + diff
		}
	}
	obj.Message = st.Message
	obj.Replicas, obj.AvailableReplicas, obj.TargetReplicas = 1, 0, 1
	if st.Converged {
		obj.AvailableReplicas = 1
	}
	st.Objects = []runtimes.Object{obj}
	return st, info, nil
}

func servingText(ts []Traffic) string {
	var parts []string
	for _, t := range ts {
		if t.Percent == 0 {
			continue
		}
		s := fmt.Sprintf("revision %s %d%%", t.Revision, t.Percent)
		if t.Revision == "" {
			s = fmt.Sprintf("no ready revision %d%%", t.Percent)
		}
		if t.Version != "" {
			s += " (" + t.Version + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func images(cs []*runpb.Container) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Image)
	}
	return strings.Join(out, ",")
}

// owner says whose the service is: "" for the instance's, else why not.
func owner(key runtimes.InstanceKey, o cloudrunspec.Object, ann map[string]string) string {
	switch got := ann[cloudrunspec.AnnotationInstance]; {
	case got == key.String():
		return ""
	case got != "":
		return fmt.Sprintf("Cloud Run service %s belongs to drover's %s, not to %s", o.ServiceName, got, key)
	case ann[cloudrunspec.AnnotationPvnID] != "":
		return fmt.Sprintf("Cloud Run service %s was deployed by Prodvana (prodvana.io/version %s); drover does not take it over (delete it, or name another service)", o.ServiceName, ann[cloudrunspec.AnnotationPvnVersion])
	}
	return fmt.Sprintf("Cloud Run service %s exists and is not drover's (no %s annotation); drover does not change it", o.ServiceName, cloudrunspec.AnnotationInstance)
}

// drift compares what drover sends with the live service: every field
// the desired service sets must have that value live (the server fills
// in defaults, which are not drift); traffic must be the same. It returns
// the first difference in words, "" for none.
func drift(desired, live *runpb.Service) string {
	want := proto.Clone(desired.Template).(*runpb.RevisionTemplate)
	want.Revision = ""
	if d := subset(want.ProtoReflect(), live.Template.ProtoReflect(), "template"); d != "" {
		return d
	}
	if len(desired.Traffic) != len(live.Traffic) {
		return fmt.Sprintf("traffic has %d targets, not %d", len(live.Traffic), len(desired.Traffic))
	}
	for i := range desired.Traffic {
		w, g := desired.Traffic[i], live.Traffic[i]
		if w.Type != g.Type || w.Percent != g.Percent || w.Tag != g.Tag || (w.Type == runpb.TrafficTargetAllocationType_TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION && w.Revision != g.Revision) {
			return fmt.Sprintf("traffic[%d] is %s, not %s", i, trafficText(g), trafficText(w))
		}
	}
	for k, v := range desired.Labels {
		if live.Labels[k] != v {
			return fmt.Sprintf("label %s is %q, not %q", k, live.Labels[k], v)
		}
	}
	if desired.Ingress != runpb.IngressTraffic_INGRESS_TRAFFIC_UNSPECIFIED && desired.Ingress != live.Ingress {
		return fmt.Sprintf("ingress is %s, not %s", live.Ingress, desired.Ingress)
	}
	return ""
}

func trafficText(t *runpb.TrafficTarget) string {
	if t.Type == runpb.TrafficTargetAllocationType_TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST {
		return fmt.Sprintf("latest %d%%", t.Percent)
	}
	return fmt.Sprintf("revision %s %d%%", t.Revision, t.Percent)
}

// subset reports the first field set in want whose value in got differs.
func subset(want, got protoreflect.Message, path string) string {
	var diff string
	want.Range(func(fd protoreflect.FieldDescriptor, wv protoreflect.Value) bool {
		p := path + "." + fd.JSONName()
		gv := got.Get(fd)
		switch {
		case fd.IsList():
			wl, gl := wv.List(), gv.List()
			if wl.Len() != gl.Len() {
				diff = fmt.Sprintf("%s has %d entries, not %d", p, gl.Len(), wl.Len())
				return false
			}
			for i := range wl.Len() {
				ep := fmt.Sprintf("%s[%d]", p, i)
				if fd.Message() != nil {
					diff = subset(wl.Get(i).Message(), gl.Get(i).Message(), ep)
				} else if !wl.Get(i).Equal(gl.Get(i)) {
					diff = fmt.Sprintf("%s is %v, not %v", ep, gl.Get(i), wl.Get(i))
				}
				if diff != "" {
					return false
				}
			}
		case fd.IsMap():
			gm := gv.Map()
			wv.Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
				g := gm.Get(k)
				if !gm.Has(k) || (fd.MapValue().Message() == nil && !g.Equal(v)) {
					diff = fmt.Sprintf("%s[%s] is %q, not %q", p, k.String(), g.String(), v.String())
					return false
				}
				return true
			})
			return diff == ""
		case fd.Message() != nil:
			if !got.Has(fd) {
				diff = p + " is not set"
				return false
			}
			diff = subset(wv.Message(), gv.Message(), p)
		case !wv.Equal(gv):
			diff = fmt.Sprintf("%s is %v, not %v", p, gv, wv)
		}
		return diff == ""
	})
	return diff
}
