package compiler

import (
	"fmt"

	"github.com/drover-dev/drover/internal/config"
	ds "github.com/drover-dev/drover/internal/desiredstate"
)

// buildDesiredState turns the compiled channels into the entity graph:
// SERVICE -> SERVICE_INSTANCE per channel -> RUNTIME_OBJECTs, with the
// channel's preconditions as conditions on the instance and approval,
// protection and extension entities as its children.
func buildDesiredState(res *Result) *ds.DesiredState {
	base := res.Application + "/" + res.Service
	root := ds.Entity{ID: ds.ID{Type: ds.TypeService, Name: base}}
	d := &ds.DesiredState{Application: res.Application, Service: res.Service, Version: res.BundleVersion}
	var order []string
	var rest []ds.Entity
	for _, rc := range res.ReleaseChannels {
		order = append(order, rc.Name)
		prefix := base + "/" + rc.Name
		inst := ds.Entity{
			ID:             ds.ID{Type: ds.TypeServiceInstance, Name: prefix},
			Parent:         &root.ID,
			ReleaseChannel: rc.Name,
		}
		root.Children = append(root.Children, inst.ID)
		child := func(e ds.Entity) {
			e.Parent = &inst.ID
			e.ReleaseChannel = rc.Name
			inst.Children = append(inst.Children, e.ID)
			rest = append(rest, e)
		}
		for _, dep := range rc.DependsOn {
			inst.Preconditions = append(inst.Preconditions, ds.Condition{
				ReleaseChannelStable: &ds.ReleaseChannelCondition{ReleaseChannel: dep, Version: res.BundleVersion},
			})
		}
		for _, dep := range rc.ServiceDependsOn {
			inst.Preconditions = append(inst.Preconditions, ds.Condition{
				ServiceStable: &ds.ServiceStableCondition{Service: dep.Service, ReleaseChannel: dep.ReleaseChannel},
			})
		}
		for i, pc := range rc.Preconditions {
			if sa := pc.SharedManualApproval; sa != nil {
				minApprovers := max(sa.MinApprovers, 1)
				topic := ds.SharedTopic(sa.Name)
				id := ds.ID{Type: ds.TypeManualApproval, Name: prefix + "/approval/" + topic}
				child(ds.Entity{ID: id, ManualApproval: &ds.ManualApproval{Topic: topic, MinApprovers: minApprovers, Shared: true,
					Description: "shared approval " + sa.Name + " (one approval for every service of the release)"}})
				inst.Preconditions = append(inst.Preconditions, ds.Condition{ManualApproval: &ds.ManualApprovalCondition{Entity: id, Topic: topic, MinApprovers: minApprovers}})
				continue
			}
			ma := pc.ManualApproval
			if ma == nil {
				continue
			}
			minApprovers := max(ma.MinApprovers, 1)
			// The approval topic is the release channel (Prodvana's SDK); a
			// named approval gets its own topic so a channel can have several.
			topic := rc.Name
			if ma.Name != "" {
				topic = rc.Name + "/" + ma.Name
			} else if i > 0 && countApprovals(rc) > 1 {
				topic = fmt.Sprintf("%s/%d", rc.Name, i)
			}
			id := ds.ID{Type: ds.TypeManualApproval, Name: prefix + "/approval/" + topic}
			child(ds.Entity{ID: id, ManualApproval: &ds.ManualApproval{Topic: topic, Description: ma.Description, MinApprovers: minApprovers, EveryAction: ma.EveryAction}})
			inst.Preconditions = append(inst.Preconditions, ds.Condition{ManualApproval: &ds.ManualApprovalCondition{Entity: id, Topic: topic, MinApprovers: minApprovers}})
		}
		for _, p := range rc.Protections {
			for _, l := range p.Lifecycle {
				phase := lifecycleName(l)
				id := ds.ID{Type: ds.TypeProtectionLink, Name: prefix + "/protection/" + p.Source + "/" + p.Attachment + "/" + phase}
				child(ds.Entity{ID: id, ProtectionLink: &ds.ProtectionLink{Protection: p.Protection, Attachment: p.Attachment, Source: p.Source, Lifecycle: phase}})
				inst.Preconditions = append(inst.Preconditions, ds.Condition{Protection: &ds.ProtectionCondition{Entity: id, Lifecycle: phase}})
			}
		}
		for i, e := range rc.ConvergenceExtensions {
			name := extensionName(e.Instance, e.Ref, e.Inlined, i)
			id := ds.ID{Type: ds.TypeDeliveryExtension, Name: prefix + "/extension/" + name}
			var deps []string
			for _, dep := range e.Dependencies {
				deps = append(deps, dep.Name)
			}
			child(ds.Entity{ID: id, DeliveryExtension: &ds.DeliveryExtension{Name: name, Lifecycle: string(e.Lifecycle), Dependencies: deps}})
			inst.Preconditions = append(inst.Preconditions, ds.Condition{DeliveryExtension: &id})
		}
		for _, obj := range rc.Objects {
			ro := runtimeObject(rc, obj, res.BundleVersion)
			child(ds.Entity{ID: ds.ID{Type: ds.TypeRuntimeObject, Name: prefix + "/" + objectKey(ro)}, RuntimeObject: ro})
		}
		rest = append(rest, inst)
	}
	d.Entities = append([]ds.Entity{root}, rest...)
	d.Sort(order)
	return d
}

func countApprovals(rc *CompiledReleaseChannel) int {
	n := 0
	for _, pc := range rc.Preconditions {
		if pc.ManualApproval != nil {
			n++
		}
	}
	return n
}

func lifecycleName(l config.ProtectionLifecycle) string {
	switch {
	case l.PreApproval != nil:
		return "preApproval"
	case l.PostApproval != nil:
		return "postApproval"
	case l.Deployment != nil:
		return "deployment"
	case l.PostDeployment != nil:
		return "postDeployment"
	}
	return "unknown"
}

// extensionName names a convergence extension reference for its entity id.
func extensionName(instance string, ref *config.DeliveryExtensionRef, inlined *config.DeliveryExtension, i int) string {
	switch {
	case instance != "":
		return instance
	case ref != nil:
		return ref.Name
	case inlined != nil && inlined.Name != "":
		return inlined.Name
	}
	return fmt.Sprintf("inlined-%d", i)
}

func objectKey(ro *ds.RuntimeObject) string {
	if ro.Namespace != "" {
		return ro.ObjectType + "/" + ro.Namespace + "/" + ro.Name
	}
	return ro.ObjectType + "/" + ro.Name
}

// runtimeObject describes a compiled object for the graph.
func runtimeObject(rc *CompiledReleaseChannel, obj any, version string) *ds.RuntimeObject {
	ro := &ds.RuntimeObject{Runtime: rc.Runtime.Name, Version: version, Namespace: rc.Runtime.Namespace}
	switch o := obj.(type) {
	case map[string]any:
		ro.ObjectType, _ = o["kind"].(string)
		if apiVersion, _ := o["apiVersion"].(string); apiVersion != "" {
			if group, _, ok := cutLast(apiVersion, "/"); ok {
				ro.ObjectType = ro.ObjectType + "." + group
			}
		}
		if md, ok := o["metadata"].(map[string]any); ok {
			ro.Name, _ = md["name"].(string)
			if ns, _ := md["namespace"].(string); ns != "" {
				ro.Namespace = ns
			}
		}
	case *CustomRuntimeObject:
		ro.ObjectType = o.Kind
		ro.Name = rc.Runtime.Name
	}
	return ro
}

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}
