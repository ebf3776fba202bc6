package notify

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/drover-dev/drover/internal/state"
	"github.com/drover-dev/drover/internal/store"
)

// Notification is one event as a target is told of it.
type Notification struct {
	// Type is the notification type (state.NotifyTypes).
	Type string
	// Delivery is the outbox row's id; Attempt counts from 1.
	Delivery int64
	Attempt  int
	Event    store.Event
	Details  Details
	// Link is the event's service (or application) in the web UI.
	Link string
}

// CloudEvents types of the notification types: CDEvents' where one exists
// (cdevents.dev, spec 0.4), drover's own otherwise.
var cloudEventTypes = map[string]string{
	state.NotifyServiceDeployed:   "dev.cdevents.service.deployed.0.2.0",
	state.NotifyServiceUpgraded:   "dev.cdevents.service.upgraded.0.2.0",
	state.NotifyServiceRolledBack: "dev.cdevents.service.rolledback.0.2.0",
	state.NotifyApprovalRequested: "dev.drover.approval.requested.0.1.0",
	state.NotifyChannelBlocked:    "dev.drover.channel.blocked.0.1.0",
	state.NotifyChannelFailed:     "dev.drover.channel.failed.0.1.0",
	state.NotifyFreezeStarted:     "dev.drover.freeze.started.0.1.0",
}

// CloudEventType is the CloudEvents type of notification type typ.
func CloudEventType(typ string) string { return cloudEventTypes[typ] }

// cdeventsVersion is the CDEvents spec version of the service events.
const cdeventsVersion = "0.4.1"

// Link is where the web UI at ui shows e ("" without ui).
func Link(ui string, e store.Event) string {
	if ui == "" || e.Application == "" {
		return ""
	}
	l := strings.TrimRight(ui, "/") + "/#/apps/" + url.PathEscape(e.Application)
	if e.Service != "" {
		l += "/services/" + url.PathEscape(e.Service)
	}
	return l
}

// Payload is drover's part of every notification: what happened, where,
// at which version, by whom, why, and where to look.
type Payload struct {
	Type           string `json:"type"`
	Application    string `json:"application,omitempty"`
	Service        string `json:"service,omitempty"`
	ReleaseChannel string `json:"releaseChannel,omitempty"`
	DesiredStateID string `json:"desiredStateId,omitempty"`
	Version        string `json:"version,omitempty"`
	// PreviousVersion is what the channel ran before (an upgrade).
	PreviousVersion string `json:"previousVersion,omitempty"`
	// Actor is who (or what: the engine) caused the event, PushedBy who
	// pushed the version.
	Actor    string `json:"actor,omitempty"`
	PushedBy string `json:"pushedBy,omitempty"`
	Release  string `json:"release,omitempty"`
	Message  string `json:"message"`
	// Reason is the status reason of a blocked channel.
	Reason         string    `json:"reason,omitempty"`
	Preview        string    `json:"preview,omitempty"`
	ApproveCommand string    `json:"approveCommand,omitempty"`
	EventSeq       int64     `json:"eventSeq"`
	EventType      string    `json:"eventType"`
	Time           time.Time `json:"time"`
	Link           string    `json:"link,omitempty"`
}

// PayloadOf is n's payload.
func PayloadOf(n Notification) Payload {
	e := n.Event
	p := Payload{
		Type: n.Type, Application: e.Application, Service: e.Service, ReleaseChannel: e.ReleaseChannel,
		DesiredStateID: e.DesiredStateID, Version: n.Details.Version, Actor: e.Actor, PushedBy: n.Details.PushedBy,
		Release: n.Details.Release, Message: e.Message, Preview: n.Details.Preview, ApproveCommand: n.Details.ApproveCommand,
		EventSeq: e.Seq, EventType: string(e.Type), Time: e.Time.UTC(), Link: n.Link,
	}
	var data struct {
		state.ConvergedData
		Reason string `json:"reason"`
	}
	if len(e.Data) > 0 && json.Unmarshal(e.Data, &data) == nil {
		if data.Version != "" {
			p.Version = data.Version
		}
		p.PreviousVersion, p.Reason = data.PreviousVersion, data.Reason
	}
	return p
}

// CloudEvent is n as a CloudEvents 1.0 event: id the event's seq (the same
// for every attempt and target, so receivers can drop repeats), source the
// service (or application), type the CDEvents or drover type. A CDEvents
// type carries a CDEvent (context and subject) with drover's payload as its
// customData; drover's types carry the payload itself.
func CloudEvent(n Notification, source string) (cloudevents.Event, error) {
	e := n.Event
	typ := CloudEventType(n.Type)
	if typ == "" {
		return cloudevents.Event{}, fmt.Errorf("notification type %q has no CloudEvents type", n.Type)
	}
	src := Source(source, e)
	ce := cloudevents.NewEvent(cloudevents.VersionV1)
	ce.SetID(strconv.FormatInt(e.Seq, 10))
	ce.SetSource(src)
	ce.SetType(typ)
	ce.SetTime(e.Time.UTC())
	if subject := subjectOf(e); subject != "" {
		ce.SetSubject(subject)
	}
	payload := PayloadOf(n)
	var data any = payload
	if strings.HasPrefix(typ, "dev.cdevents.") {
		data = cdevent{
			Context: cdeventContext{Version: cdeventsVersion, ID: ce.ID(), Source: src, Type: typ, Timestamp: e.Time.UTC()},
			Subject: cdeventSubject{ID: e.Application + "/" + e.Service, Source: src, Type: "service", Content: cdeventContent{
				Environment: cdeventRef{ID: e.ReleaseChannel, Source: src},
				ArtifactID:  artifactID(e.Service, payload.Version),
			}},
			CustomData:            payload,
			CustomDataContentType: "application/json",
		}
	}
	if err := ce.SetData(cloudevents.ApplicationJSON, data); err != nil {
		return cloudevents.Event{}, err
	}
	return ce, ce.Validate()
}

// Source is the CloudEvents source of e: its service under base (drover's
// web UI address, or "/drover" without one).
func Source(base string, e store.Event) string {
	if base == "" {
		base = "/drover"
	}
	s := strings.TrimRight(base, "/") + "/apps/" + url.PathEscape(e.Application)
	if e.Service != "" {
		s += "/services/" + url.PathEscape(e.Service)
	}
	return s
}

func subjectOf(e store.Event) string {
	parts := []string{}
	for _, p := range []string{e.Application, e.Service, e.ReleaseChannel} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "/")
}

// artifactID is a package URL naming the service's version.
func artifactID(service, version string) string {
	if version == "" {
		version = "unknown"
	}
	return "pkg:generic/" + url.PathEscape(service) + "@" + url.PathEscape(version)
}

// cdevent is a CDEvents 0.4 event (context, subject, customData).
type cdevent struct {
	Context               cdeventContext `json:"context"`
	Subject               cdeventSubject `json:"subject"`
	CustomData            Payload        `json:"customData"`
	CustomDataContentType string         `json:"customDataContentType"`
}

type cdeventContext struct {
	Version   string    `json:"version"`
	ID        string    `json:"id"`
	Source    string    `json:"source"`
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
}

type cdeventSubject struct {
	ID      string         `json:"id"`
	Source  string         `json:"source"`
	Type    string         `json:"type"`
	Content cdeventContent `json:"content"`
}

type cdeventContent struct {
	Environment cdeventRef `json:"environment"`
	ArtifactID  string     `json:"artifactId"`
}

type cdeventRef struct {
	ID     string `json:"id"`
	Source string `json:"source,omitempty"`
}
