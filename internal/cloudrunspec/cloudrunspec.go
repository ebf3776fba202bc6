// Package cloudrunspec is the compiled form of a service on a Google Cloud
// Run runtime, shared by the compiler (which renders and checks it) and the
// Cloud Run runtime (which applies it): the Knative Service YAML that
// `gcloud run services replace` takes, decoded strictly, and its
// translation to the Cloud Run Admin API v2's Service (runpb.Service).
//
// Every field of the Knative document is either mapped to the v2 Service
// (the table in docs/cloud-run.md) or refused by name: nothing is dropped.
package cloudrunspec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"gopkg.in/yaml.v3"
)

// Kind is the kind of a compiled Cloud Run object (Object.Kind), and the
// backend of a compiled channel that runs on Cloud Run.
const Kind = "googleCloudRun"

// ConvergenceGrace is how long after an apply a Cloud Run service may still
// not show the new revision before the engine applies again: the API
// answers with a long-running operation at once, and a revision is
// usually ready within a minute or two.
const ConvergenceGrace = 5 * time.Minute

// Annotations drover puts on the services it applies (metadata) and on
// their revision templates, so each revision carries its version; and
// Prodvana's, read for services Prodvana deployed.
const (
	AnnotationInstance   = "drover.dev/instance"
	AnnotationVersion    = "drover.dev/version"
	AnnotationSpec       = "drover.dev/spec"
	AnnotationPvnID      = "prodvana.io/id"
	AnnotationPvnVersion = "prodvana.io/version"
)

// Object is what the Cloud Run runtime applies for one service instance.
type Object struct {
	Kind    string `json:"kind"`
	Runtime string `json:"runtime"`
	// ServiceName is the Cloud Run service's name (metadata.name).
	ServiceName string `json:"serviceName"`
	// Service is the rendered Knative Service, as JSON (the YAML's
	// content, with the channel's env added to every container).
	Service json.RawMessage `json:"service"`
}

// Error is a document that does not decode or translate, with the line
// (1-based, 0 when unknown) of the rendered text and the field's path.
type Error struct {
	Line  int
	Field string
	Msg   string
}

func (e *Error) Error() string {
	msg := e.Msg
	if e.Field != "" {
		msg = e.Field + ": " + msg
	}
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, msg)
	}
	return msg
}

// Knative is the Knative Service document (serving.knative.dev/v1), the
// fields drover maps; any other is refused when decoding.
type Knative struct {
	APIVersion string   `yaml:"apiVersion" json:"apiVersion"`
	Kind       string   `yaml:"kind" json:"kind"`
	Metadata   Metadata `yaml:"metadata" json:"metadata"`
	Spec       Spec     `yaml:"spec" json:"spec"`
}

// Metadata is a service's or revision template's metadata.
type Metadata struct {
	Name        string            `yaml:"name,omitempty" json:"name,omitempty"`
	Namespace   string            `yaml:"namespace,omitempty" json:"namespace,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty" json:"annotations,omitempty"`
}

// Spec is a service's spec.
type Spec struct {
	Template Template  `yaml:"template" json:"template"`
	Traffic  []Traffic `yaml:"traffic,omitempty" json:"traffic,omitempty"`
}

// Template is the revision template.
type Template struct {
	Metadata Metadata     `yaml:"metadata,omitempty" json:"metadata,omitzero"`
	Spec     TemplateSpec `yaml:"spec" json:"spec"`
}

// TemplateSpec is the revision's spec.
type TemplateSpec struct {
	ServiceAccountName   string      `yaml:"serviceAccountName,omitempty" json:"serviceAccountName,omitempty"`
	ContainerConcurrency *int32      `yaml:"containerConcurrency,omitempty" json:"containerConcurrency,omitempty"`
	TimeoutSeconds       *int64      `yaml:"timeoutSeconds,omitempty" json:"timeoutSeconds,omitempty"`
	Containers           []Container `yaml:"containers" json:"containers"`
}

// Container is one container of the revision.
type Container struct {
	Name       string     `yaml:"name,omitempty" json:"name,omitempty"`
	Image      string     `yaml:"image" json:"image"`
	Command    []string   `yaml:"command,omitempty" json:"command,omitempty"`
	Args       []string   `yaml:"args,omitempty" json:"args,omitempty"`
	WorkingDir string     `yaml:"workingDir,omitempty" json:"workingDir,omitempty"`
	Env        []EnvVar   `yaml:"env,omitempty" json:"env,omitempty"`
	Ports      []Port     `yaml:"ports,omitempty" json:"ports,omitempty"`
	Resources  *Resources `yaml:"resources,omitempty" json:"resources,omitempty"`
}

// EnvVar is a plain environment variable (valueFrom is not mapped).
type EnvVar struct {
	Name  string `yaml:"name" json:"name"`
	Value string `yaml:"value" json:"value"`
}

// Port is the container's serving port.
type Port struct {
	Name          string `yaml:"name,omitempty" json:"name,omitempty"`
	ContainerPort int32  `yaml:"containerPort" json:"containerPort"`
}

// Resources are the container's limits (Cloud Run has no requests).
type Resources struct {
	Limits map[string]string `yaml:"limits,omitempty" json:"limits,omitempty"`
}

// Traffic is one traffic target.
type Traffic struct {
	Percent        *int32 `yaml:"percent,omitempty" json:"percent,omitempty"`
	LatestRevision *bool  `yaml:"latestRevision,omitempty" json:"latestRevision,omitempty"`
	RevisionName   string `yaml:"revisionName,omitempty" json:"revisionName,omitempty"`
	Tag            string `yaml:"tag,omitempty" json:"tag,omitempty"`
}

// yamlTypes names decode's struct types as the document's paths, for
// messages about unknown fields.
var yamlTypes = map[string]string{
	"Knative": "", "Metadata": "metadata", "Spec": "spec", "Template": "spec.template",
	"TemplateSpec": "spec.template.spec", "Container": "spec.template.spec.containers[]",
	"EnvVar": "spec.template.spec.containers[].env[]", "Port": "spec.template.spec.containers[].ports[]",
	"Resources": "spec.template.spec.containers[].resources", "Traffic": "spec.traffic[]",
}

var unknownFieldRE = regexp.MustCompile(`line (\d+): field (\S+) not found in type cloudrunspec\.(\w+)`)
var yamlLineRE = regexp.MustCompile(`line (\d+): (.*)`)

// Decode reads a Knative Service from YAML (or JSON) strictly: a field
// drover does not map is an error naming it and its line.
func Decode(text []byte) (*Knative, error) {
	var k Knative
	d := yaml.NewDecoder(bytes.NewReader(text))
	d.KnownFields(true)
	if err := d.Decode(&k); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{Msg: "empty document: want a Knative Service (apiVersion: serving.knative.dev/v1, kind: Service)"}
		}
		return nil, yamlError(err)
	}
	var extra any
	if err := d.Decode(&extra); err == nil {
		return nil, &Error{Msg: "more than one YAML document: want one Knative Service"}
	}
	if err := k.check(text); err != nil {
		return nil, err
	}
	return &k, nil
}

// yamlError turns yaml.v3's messages into the document's words.
func yamlError(err error) error {
	msg := err.Error()
	if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		field := m[2]
		if p := yamlTypes[m[3]]; p != "" {
			field = p + "." + field
		}
		return &Error{Line: line, Field: field, Msg: "drover does not map this field to Cloud Run (see docs/cloud-run.md for the fields it maps)"}
	}
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{Line: line, Msg: "invalid Knative Service: " + strings.TrimSpace(m[2])}
	}
	return &Error{Msg: "invalid Knative Service: " + strings.TrimPrefix(msg, "yaml: ")}
}

// lineOf is the line of the first occurrence of s in text (0 if none).
func lineOf(text []byte, s string) int {
	i := bytes.Index(text, []byte(s))
	if i < 0 {
		return 0
	}
	return bytes.Count(text[:i], []byte("\n")) + 1
}

// serviceNameRE is what Cloud Run accepts as a service name.
var serviceNameRE = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,47}[a-z0-9])?$`)

func (k *Knative) check(text []byte) error {
	bad := func(field, key, msg string) error {
		return &Error{Line: lineOf(text, key+":"), Field: field, Msg: msg}
	}
	switch {
	case k.APIVersion != "serving.knative.dev/v1":
		return bad("apiVersion", "apiVersion", fmt.Sprintf("want serving.knative.dev/v1 (a Knative Service as gcloud run services replace takes it), got %q", k.APIVersion))
	case k.Kind != "Service":
		return bad("kind", "kind", fmt.Sprintf("want Service, got %q", k.Kind))
	case !serviceNameRE.MatchString(k.Metadata.Name):
		return bad("metadata.name", "name", fmt.Sprintf("%q is not a Cloud Run service name (lowercase letters, digits and -, starting with a letter, at most 49)", k.Metadata.Name))
	case len(k.Spec.Template.Spec.Containers) == 0:
		return bad("spec.template.spec.containers", "containers", "at least one container is required")
	}
	for i, c := range k.Spec.Template.Spec.Containers {
		if c.Image == "" {
			return bad(fmt.Sprintf("spec.template.spec.containers[%d].image", i), "containers", "image is required")
		}
	}
	return nil
}

// reserved are the annotation prefixes the v2 API refuses as annotations:
// those drover maps are translated to fields, any other is refused.
var reserved = []string{"run.googleapis.com/", "cloud.googleapis.com/", "serving.knative.dev/", "autoscaling.knative.dev/"}

func isReserved(key string) bool {
	return slices.ContainsFunc(reserved, func(p string) bool { return strings.HasPrefix(key, p) })
}

// Translate maps the Knative Service to the v2 API's Service for project
// and region. The result's Name is the service's full resource name.
func (k *Knative) Translate(project, region string) (*runpb.Service, error) {
	if ns := k.Metadata.Namespace; ns != "" && ns != project {
		return nil, &Error{Field: "metadata.namespace", Msg: fmt.Sprintf("%q is not the runtime's project %q (leave it out: the runtime's project is used)", ns, project)}
	}
	svc := &runpb.Service{
		Name:     fmt.Sprintf("projects/%s/locations/%s/services/%s", project, region, k.Metadata.Name),
		Labels:   cloneMap(k.Metadata.Labels),
		Template: &runpb.RevisionTemplate{},
	}
	for key, v := range k.Metadata.Annotations {
		field := "metadata.annotations." + key
		switch key {
		case "run.googleapis.com/ingress":
			in, ok := ingress[v]
			if !ok {
				return nil, &Error{Field: field, Msg: fmt.Sprintf("%q: want all, internal, internal-and-cloud-load-balancing or none", v)}
			}
			svc.Ingress = in
		case "run.googleapis.com/description":
			svc.Description = v
		default:
			if isReserved(key) {
				return nil, &Error{Field: field, Msg: "drover does not map this annotation to Cloud Run's v2 API (see docs/cloud-run.md)"}
			}
			if svc.Annotations == nil {
				svc.Annotations = map[string]string{}
			}
			svc.Annotations[key] = v
		}
	}
	t, ts := svc.Template, k.Spec.Template.Spec
	t.Labels = cloneMap(k.Spec.Template.Metadata.Labels)
	if n := k.Spec.Template.Metadata.Name; n != "" {
		if !strings.HasPrefix(n, k.Metadata.Name+"-") {
			return nil, &Error{Field: "spec.template.metadata.name", Msg: fmt.Sprintf("a revision name must start with the service's name and a dash (%s-...)", k.Metadata.Name)}
		}
		t.Revision = n
	}
	if k.Spec.Template.Metadata.Namespace != "" {
		return nil, &Error{Field: "spec.template.metadata.namespace", Msg: "a revision has no namespace of its own; leave it out"}
	}
	for key, v := range k.Spec.Template.Metadata.Annotations {
		field := "spec.template.metadata.annotations." + key
		switch key {
		case "autoscaling.knative.dev/minScale", "autoscaling.knative.dev/maxScale":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 0 {
				return nil, &Error{Field: field, Msg: fmt.Sprintf("%q is not a count of instances", v)}
			}
			if t.Scaling == nil {
				t.Scaling = &runpb.RevisionScaling{}
			}
			if key == "autoscaling.knative.dev/minScale" {
				t.Scaling.MinInstanceCount = int32(n)
			} else {
				t.Scaling.MaxInstanceCount = int32(n)
			}
		case "run.googleapis.com/execution-environment":
			switch v {
			case "gen1":
				t.ExecutionEnvironment = runpb.ExecutionEnvironment_EXECUTION_ENVIRONMENT_GEN1
			case "gen2":
				t.ExecutionEnvironment = runpb.ExecutionEnvironment_EXECUTION_ENVIRONMENT_GEN2
			default:
				return nil, &Error{Field: field, Msg: fmt.Sprintf("%q: want gen1 or gen2", v)}
			}
		case "run.googleapis.com/cpu-throttling", "run.googleapis.com/startup-cpu-boost":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, &Error{Field: field, Msg: fmt.Sprintf("%q: want true or false", v)}
			}
			defer func() { // once the containers are there
				for _, c := range t.Containers {
					if c.Resources == nil {
						c.Resources = &runpb.ResourceRequirements{}
					}
					if key == "run.googleapis.com/cpu-throttling" {
						c.Resources.CpuIdle = b
					} else {
						c.Resources.StartupCpuBoost = b
					}
				}
			}()
		default:
			if isReserved(key) {
				return nil, &Error{Field: field, Msg: "drover does not map this annotation to Cloud Run's v2 API (see docs/cloud-run.md)"}
			}
			if t.Annotations == nil {
				t.Annotations = map[string]string{}
			}
			t.Annotations[key] = v
		}
	}
	t.ServiceAccount = ts.ServiceAccountName
	if ts.ContainerConcurrency != nil {
		t.MaxInstanceRequestConcurrency = *ts.ContainerConcurrency
	}
	if ts.TimeoutSeconds != nil {
		t.Timeout = durationpb.New(time.Duration(*ts.TimeoutSeconds) * time.Second)
	}
	for i, c := range ts.Containers {
		pc := &runpb.Container{Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args, WorkingDir: c.WorkingDir}
		for _, e := range c.Env {
			if e.Name == "" {
				return nil, &Error{Field: fmt.Sprintf("spec.template.spec.containers[%d].env", i), Msg: "an env entry needs a name"}
			}
			pc.Env = append(pc.Env, &runpb.EnvVar{Name: e.Name, Values: &runpb.EnvVar_Value{Value: e.Value}})
		}
		for _, p := range c.Ports {
			pc.Ports = append(pc.Ports, &runpb.ContainerPort{Name: p.Name, ContainerPort: p.ContainerPort})
		}
		if len(c.Ports) > 1 {
			return nil, &Error{Field: fmt.Sprintf("spec.template.spec.containers[%d].ports", i), Msg: "Cloud Run serves one port per container"}
		}
		if r := c.Resources; r != nil && len(r.Limits) > 0 {
			pc.Resources = &runpb.ResourceRequirements{Limits: cloneMap(r.Limits)}
		}
		t.Containers = append(t.Containers, pc)
	}
	total := int32(0)
	for i, tr := range k.Spec.Traffic {
		field := fmt.Sprintf("spec.traffic[%d]", i)
		tt := &runpb.TrafficTarget{Tag: tr.Tag}
		latest := tr.LatestRevision != nil && *tr.LatestRevision
		switch {
		case latest && tr.RevisionName != "":
			return nil, &Error{Field: field, Msg: "set latestRevision or revisionName, not both"}
		case latest:
			tt.Type = runpb.TrafficTargetAllocationType_TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST
		case tr.RevisionName != "":
			tt.Type, tt.Revision = runpb.TrafficTargetAllocationType_TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION, tr.RevisionName
		default:
			return nil, &Error{Field: field, Msg: "set latestRevision: true or revisionName"}
		}
		if tr.Percent != nil {
			if *tr.Percent < 0 || *tr.Percent > 100 {
				return nil, &Error{Field: field + ".percent", Msg: "a percent from 0 to 100"}
			}
			tt.Percent = *tr.Percent
			total += *tr.Percent
		}
		svc.Traffic = append(svc.Traffic, tt)
	}
	if len(svc.Traffic) > 0 && total != 100 {
		return nil, &Error{Field: "spec.traffic", Msg: fmt.Sprintf("the percents add up to %d, not 100", total)}
	}
	if len(svc.Traffic) == 0 {
		svc.Traffic = []*runpb.TrafficTarget{{Type: runpb.TrafficTargetAllocationType_TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST, Percent: 100}}
	}
	return svc, nil
}

var ingress = map[string]runpb.IngressTraffic{
	"all":                               runpb.IngressTraffic_INGRESS_TRAFFIC_ALL,
	"internal":                          runpb.IngressTraffic_INGRESS_TRAFFIC_INTERNAL_ONLY,
	"internal-and-cloud-load-balancing": runpb.IngressTraffic_INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER,
	"none":                              runpb.IngressTraffic_INGRESS_TRAFFIC_NONE,
}

func cloneMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// SpecHash is a short hash of what drover sends for a service (its
// template and traffic, before drover's annotations), so an identical
// spec is known again.
func SpecHash(svc *runpb.Service) string {
	cp := proto.Clone(svc).(*runpb.Service)
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(cp)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// ParseObject decodes the Knative Service of a compiled object.
func ParseObject(o Object) (*Knative, error) {
	return Decode(o.Service)
}

// ServiceJSON is k as the JSON a compiled object holds.
func ServiceJSON(k *Knative) (json.RawMessage, error) {
	return json.Marshal(k)
}
