// Package desiredstate holds the domain types shared by the compiler and the
// convergence engine: the desired-state entity graph, and the statuses and
// reasons every entity reports.
//
// A desired state is a tree rooted at a SERVICE entity, with one
// SERVICE_INSTANCE per release channel, and under each instance the
// RUNTIME_OBJECTs to converge and the condition entities (MANUAL_APPROVAL,
// PROTECTION_LINK, DELIVERY_EXTENSION) that gate it. Preconditions are listed on
// the instance they gate; the engine evaluates them before it lets the
// instance's target move to the new version.
package desiredstate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// EntityType is the kind of an entity in the graph.
type EntityType string

// Entity types, as in Prodvana's desired-state graph.
const (
	TypeService           EntityType = "SERVICE"
	TypeServiceInstance   EntityType = "SERVICE_INSTANCE"
	TypeRuntimeObject     EntityType = "RUNTIME_OBJECT"
	TypeManualApproval    EntityType = "MANUAL_APPROVAL"
	TypeProtectionLink    EntityType = "PROTECTION_LINK"
	TypeDeliveryExtension EntityType = "DELIVERY_EXTENSION"
)

// ID identifies an entity; Name is unique across the whole graph.
type ID struct {
	Type EntityType `json:"type"`
	Name string     `json:"name"`
}

func (id ID) String() string { return string(id.Type) + ":" + id.Name }

// DesiredState is the entity graph of one service at one version.
type DesiredState struct {
	Application string `json:"application"`
	Service     string `json:"service"`
	// Version is the service (bundle) version every instance converges to.
	Version  string   `json:"version"`
	Entities []Entity `json:"entities"`
}

// Entity is one node of the graph.
type Entity struct {
	ID             ID          `json:"id"`
	Parent         *ID         `json:"parent,omitempty"`
	Children       []ID        `json:"children,omitempty"`
	ReleaseChannel string      `json:"releaseChannel,omitempty"`
	Preconditions  []Condition `json:"preconditions,omitempty"`

	RuntimeObject     *RuntimeObject     `json:"runtimeObject,omitempty"`
	ManualApproval    *ManualApproval    `json:"manualApproval,omitempty"`
	ProtectionLink    *ProtectionLink    `json:"protectionLink,omitempty"`
	DeliveryExtension *DeliveryExtension `json:"deliveryExtension,omitempty"`
}

// Condition is one precondition of an entity; exactly one field is set.
type Condition struct {
	// ReleaseChannelStable is satisfied when the same service is converged at
	// Version in ReleaseChannel.
	ReleaseChannelStable *ReleaseChannelCondition `json:"releaseChannelStable,omitempty"`
	// ServiceStable is satisfied when another service of the application
	// runs converged in ReleaseChannel (service.dependsOn).
	ServiceStable *ServiceStableCondition `json:"serviceStable,omitempty"`
	// ManualApproval is satisfied by approvals on Topic.
	ManualApproval *ManualApprovalCondition `json:"manualApproval,omitempty"`
	// Protection is satisfied when the linked protection passes.
	Protection *ProtectionCondition `json:"protection,omitempty"`
	// DeliveryExtension is satisfied when the extension has succeeded once.
	DeliveryExtension *ID `json:"deliveryExtension,omitempty"`
}

// ReleaseChannelCondition waits for another release channel.
type ReleaseChannelCondition struct {
	ReleaseChannel string `json:"releaseChannel"`
	Version        string `json:"version"`
}

// ServiceStableCondition waits for another service (Prodvana's serviceStable).
type ServiceStableCondition struct {
	Service        string `json:"service"`
	ReleaseChannel string `json:"releaseChannel"`
}

// ManualApprovalCondition waits for approvals.
type ManualApprovalCondition struct {
	Entity       ID     `json:"entity"`
	Topic        string `json:"topic"`
	MinApprovers int32  `json:"minApprovers"`
}

// ProtectionCondition waits for a protection link.
type ProtectionCondition struct {
	Entity    ID     `json:"entity"`
	Lifecycle string `json:"lifecycle"`
}

// RuntimeObject is something the runtime converges: a Kubernetes object, or the
// aggregate a custom runtime reports.
type RuntimeObject struct {
	Runtime    string `json:"runtime"`
	ObjectType string `json:"objectType"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	Version    string `json:"version"`
}

// ManualApproval is an approval gate; Topic is the release channel name.
type ManualApproval struct {
	Topic        string `json:"topic"`
	Description  string `json:"description,omitempty"`
	MinApprovers int32  `json:"minApprovers"`
	EveryAction  bool   `json:"everyAction,omitempty"`
	// Shared marks a sharedManualApproval: its Topic is SharedTopic(name),
	// and an approval of it on any service of the release counts.
	Shared bool `json:"shared,omitempty"`
}

// SharedTopic is the approval topic of the sharedManualApproval name.
func SharedTopic(name string) string { return "shared/" + name }

// ProtectionLink runs a protection in one lifecycle phase of an instance.
type ProtectionLink struct {
	Protection string `json:"protection"`
	Attachment string `json:"attachment"`
	// Source is where the attachment came from: releaseChannel, serviceInstance or convergence.
	Source    string `json:"source"`
	Lifecycle string `json:"lifecycle"`
}

// DeliveryExtension is a run-to-completion job in one lifecycle phase.
type DeliveryExtension struct {
	Name         string   `json:"name"`
	Lifecycle    string   `json:"lifecycle"`
	Dependencies []string `json:"dependencies,omitempty"`
}

// Entity returns the entity with id, or nil.
func (d *DesiredState) Entity(id ID) *Entity {
	for i := range d.Entities {
		if d.Entities[i].ID == id {
			return &d.Entities[i]
		}
	}
	return nil
}

// Root returns the SERVICE entity.
func (d *DesiredState) Root() *Entity {
	for i := range d.Entities {
		if d.Entities[i].ID.Type == TypeService {
			return &d.Entities[i]
		}
	}
	return nil
}

// Instances returns the SERVICE_INSTANCE entities in release channel order.
func (d *DesiredState) Instances() []*Entity {
	var out []*Entity
	for i := range d.Entities {
		if d.Entities[i].ID.Type == TypeServiceInstance {
			out = append(out, &d.Entities[i])
		}
	}
	return out
}

// Check verifies the graph's structure: unique ids, parents and children that
// agree, and conditions that point at existing entities.
func (d *DesiredState) Check() error {
	ids := map[ID]*Entity{}
	for i := range d.Entities {
		e := &d.Entities[i]
		if _, dup := ids[e.ID]; dup {
			return fmt.Errorf("duplicate entity %s", e.ID)
		}
		ids[e.ID] = e
	}
	for _, e := range ids {
		if e.Parent != nil {
			p, ok := ids[*e.Parent]
			if !ok {
				return fmt.Errorf("entity %s: unknown parent %s", e.ID, e.Parent)
			}
			found := false
			for _, c := range p.Children {
				found = found || c == e.ID
			}
			if !found {
				return fmt.Errorf("entity %s is not a child of its parent %s", e.ID, p.ID)
			}
		}
		for _, c := range e.Children {
			if ids[c] == nil {
				return fmt.Errorf("entity %s: unknown child %s", e.ID, c)
			}
		}
		for _, pc := range e.Preconditions {
			var ref *ID
			switch {
			case pc.ManualApproval != nil:
				ref = &pc.ManualApproval.Entity
			case pc.Protection != nil:
				ref = &pc.Protection.Entity
			case pc.DeliveryExtension != nil:
				ref = pc.DeliveryExtension
			}
			if ref != nil && ids[*ref] == nil {
				return fmt.Errorf("entity %s: precondition on unknown entity %s", e.ID, ref)
			}
		}
	}
	return nil
}

// Sort orders entities deterministically: the service, then per instance in
// the order given, its children by id.
func (d *DesiredState) Sort(instanceOrder []string) {
	rank := map[string]int{}
	for i, rc := range instanceOrder {
		rank[rc] = i
	}
	typeRank := map[EntityType]int{TypeService: 0, TypeServiceInstance: 1, TypeManualApproval: 2, TypeProtectionLink: 3, TypeDeliveryExtension: 4, TypeRuntimeObject: 5}
	sort.SliceStable(d.Entities, func(i, j int) bool {
		a, b := d.Entities[i], d.Entities[j]
		if (a.ID.Type == TypeService) != (b.ID.Type == TypeService) {
			return a.ID.Type == TypeService
		}
		if rank[a.ReleaseChannel] != rank[b.ReleaseChannel] {
			return rank[a.ReleaseChannel] < rank[b.ReleaseChannel]
		}
		if typeRank[a.ID.Type] != typeRank[b.ID.Type] {
			return typeRank[a.ID.Type] < typeRank[b.ID.Type]
		}
		return a.ID.Name < b.ID.Name
	})
}

// ManagedNamespace is the namespace drover creates for an application's
// release channel when the channel names none: drover-<app>-<rc>, shortened
// with a hash suffix to fit a DNS label (63 characters).
func ManagedNamespace(app, rc string) string {
	name := "drover-" + app + "-" + rc
	if len(name) <= 63 {
		return name
	}
	// The Kubernetes runtime shortens names the same way (kubernetes.DNSLabel).
	sum := sha256.Sum256([]byte(name))
	suffix := "-" + hex.EncodeToString(sum[:4])
	return strings.TrimRight(name[:63-len(suffix)], "-") + suffix
}
