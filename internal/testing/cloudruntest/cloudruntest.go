// Package cloudruntest is a test server of the Google Cloud Run Admin API
// v2, built on its published proto definitions (the generated runpb and
// longrunningpb packages), for tests of the Cloud Run runtime: no Cloud
// Run emulator exists. It listens on 127.0.0.1 only, over plain gRPC.
//
// What it does, as the API reference documents it: services are created,
// updated (replaced), read, listed and deleted through long-running
// operations; each write bumps the service's generation and etag (an
// update naming a stale etag is refused with ABORTED); an update whose
// revision template differs from the latest revision's creates a revision
// named <service>-<5 digit generation>-<3 letters> (or the template's
// revision name); a revision becomes ready ReadyDelay after it was
// created, or fails then when one of its images has the tag ":broken";
// the service's latestReadyRevision, latestCreatedRevision,
// terminalCondition, conditions, observedGeneration, reconciling and
// trafficStatuses (TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST resolved to the
// latest ready revision) follow; operations are done once the service
// has settled, with the service as their response, or with the
// revision's failure as their error. Server defaults are filled in as
// Cloud Run does for a few fields (container port 8080, cpu and memory
// limits, concurrency 80, timeout 300s, a default service account), so
// clients see more than they sent.
//
// What it does not emulate: IAM (every call is allowed; credentials are
// not checked), real containers and URLs that answer, request routing,
// revision garbage collection, update masks, validate-only requests,
// jobs, executions, tasks, worker pools and builds, quotas and
// throttling, and most field validation.
package cloudruntest

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// BrokenTag is the image tag that makes a revision fail to become ready.
const BrokenTag = ":broken"

// DefaultReadyDelay is how long a revision takes to become ready.
const DefaultReadyDelay = 300 * time.Millisecond

// Server is the Cloud Run Admin API v2 test server.
type Server struct {
	runpb.UnimplementedServicesServer
	runpb.UnimplementedRevisionsServer
	longrunningpb.UnimplementedOperationsServer

	// ReadyDelay is how long a new revision stays not ready.
	ReadyDelay time.Duration

	grpc *grpc.Server
	lis  net.Listener

	mu        sync.Mutex
	now       func() time.Time
	services  map[string]*service
	revisions map[string]*revision
	ops       map[string]*operation
	calls     map[string]int
	seq       int
}

type service struct {
	svc     *runpb.Service
	revs    []string // revision names in creation order
	deleted bool
}

type revision struct {
	rev     *runpb.Revision
	readyAt time.Time
	hash    string
	settled bool
}

type operation struct {
	op         *longrunningpb.Operation
	service    string
	generation int64
	delete     bool
}

// New returns a server not yet listening.
func New() *Server {
	return &Server{ReadyDelay: DefaultReadyDelay, now: time.Now, services: map[string]*service{},
		revisions: map[string]*revision{}, ops: map[string]*operation{}, calls: map[string]int{}}
}

// Start serves on 127.0.0.1 (port 0 = any) until Close.
func (s *Server) Start(addr string) error {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("cloudruntest listens on loopback only, not %s", addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s.lis = lis
	s.grpc = grpc.NewServer(grpc.UnaryInterceptor(s.count))
	runpb.RegisterServicesServer(s.grpc, s)
	runpb.RegisterRevisionsServer(s.grpc, s)
	longrunningpb.RegisterOperationsServer(s.grpc, s)
	go func() { _ = s.grpc.Serve(lis) }()
	return nil
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Close stops the server.
func (s *Server) Close() { s.grpc.Stop() }

// Start starts a server for a test, closed with it.
func Start(t testing.TB) *Server {
	t.Helper()
	s := New()
	if err := s.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func (s *Server) count(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	s.mu.Lock()
	s.calls[info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]]++
	s.mu.Unlock()
	return h(ctx, req)
}

// Calls returns the API calls served since the start (or Reset), by method.
func (s *Server) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls)
}

// Count is the number of calls served since the start (or Reset).
func (s *Server) Count() int {
	n := 0
	for _, c := range s.Calls() {
		n += c
	}
	return n
}

// Reset clears the call counts.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.calls)
}

// settle moves revisions, services and operations past their delay.
// Called with s.mu held.
func (s *Server) settle() {
	now := s.now()
	for _, r := range s.revisions {
		if r.settled || now.Before(r.readyAt) {
			continue
		}
		r.settled = true
		r.rev.Reconciling = false
		r.rev.ObservedGeneration = r.rev.Generation
		ready := &runpb.Condition{Type: "Ready", State: runpb.Condition_CONDITION_SUCCEEDED, LastTransitionTime: timestamppb.New(now)}
		for _, c := range r.rev.Containers {
			if strings.HasSuffix(c.Image, BrokenTag) {
				ready.State = runpb.Condition_CONDITION_FAILED
				ready.Message = fmt.Sprintf("The user-provided container failed to start and listen on the port defined provided by the PORT=%d environment variable within the allocated timeout. Logs for this revision might contain more information.", port(c))
				ready.Reasons = &runpb.Condition_RevisionReason_{RevisionReason: runpb.Condition_HEALTH_CHECK_CONTAINER_ERROR}
			}
		}
		r.rev.Conditions = []*runpb.Condition{ready}
	}
	for _, sv := range s.services {
		s.resolve(sv, now)
	}
	for _, op := range s.ops {
		if op.op.Done {
			continue
		}
		sv := s.services[op.service]
		if op.delete {
			op.op.Done = true
			op.op.Result = &longrunningpb.Operation_Response{Response: mustAny(sv.svc)}
			continue
		}
		if sv == nil || sv.svc.Generation != op.generation || sv.svc.Reconciling {
			if sv != nil && sv.svc.Generation != op.generation {
				op.op.Done = true // superseded
				op.op.Result = &longrunningpb.Operation_Response{Response: mustAny(sv.svc)}
			}
			continue
		}
		op.op.Done = true
		if tc := sv.svc.TerminalCondition; tc != nil && tc.State == runpb.Condition_CONDITION_FAILED {
			op.op.Result = &longrunningpb.Operation_Error{Error: &status.Status{Code: int32(codes.FailedPrecondition), Message: tc.Message}}
		} else {
			op.op.Result = &longrunningpb.Operation_Response{Response: mustAny(sv.svc)}
		}
	}
}

func port(c *runpb.Container) int32 {
	if len(c.Ports) > 0 && c.Ports[0].ContainerPort != 0 {
		return c.Ports[0].ContainerPort
	}
	return 8080
}

// resolve computes a service's status from its revisions.
func (s *Server) resolve(sv *service, now time.Time) {
	svc := sv.svc
	latestReady := ""
	for _, name := range sv.revs {
		r := s.revisions[name]
		if r.settled && r.rev.Conditions[0].State == runpb.Condition_CONDITION_SUCCEEDED {
			latestReady = name
		}
	}
	svc.LatestReadyRevision = latestReady
	latest := s.revisions[svc.LatestCreatedRevision]
	var tc *runpb.Condition
	switch {
	case latest == nil:
		tc = &runpb.Condition{Type: "Ready", State: runpb.Condition_CONDITION_FAILED, Message: "the service has no revision"}
	case !latest.settled:
		tc = &runpb.Condition{Type: "Ready", State: runpb.Condition_CONDITION_RECONCILING, Message: fmt.Sprintf("Revision '%s' is being deployed.", short(latest.rev.Name))}
	case latest.rev.Conditions[0].State == runpb.Condition_CONDITION_FAILED:
		tc = &runpb.Condition{Type: "Ready", State: runpb.Condition_CONDITION_FAILED,
			Message: fmt.Sprintf("Revision '%s' is not ready and cannot serve traffic. %s", short(latest.rev.Name), latest.rev.Conditions[0].Message)}
	default:
		tc = &runpb.Condition{Type: "Ready", State: runpb.Condition_CONDITION_SUCCEEDED}
	}
	var statuses []*runpb.TrafficTargetStatus
	for _, t := range svc.Traffic {
		st := &runpb.TrafficTargetStatus{Type: t.Type, Revision: t.Revision, Percent: t.Percent, Tag: t.Tag}
		if t.Type == runpb.TrafficTargetAllocationType_TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST {
			st.Revision = short(latestReady)
		}
		statuses = append(statuses, st)
	}
	if latestReady == "" && tc.State == runpb.Condition_CONDITION_SUCCEEDED {
		tc.State = runpb.Condition_CONDITION_RECONCILING
	}
	if old := svc.TerminalCondition; old == nil || old.State != tc.State || old.Message != tc.Message {
		tc.LastTransitionTime = timestamppb.New(now)
	} else {
		tc.LastTransitionTime = old.LastTransitionTime
	}
	svc.TerminalCondition = tc
	svc.Reconciling = tc.State == runpb.Condition_CONDITION_RECONCILING
	if !svc.Reconciling {
		svc.ObservedGeneration = svc.Generation
	}
	rr := &runpb.Condition{Type: "RoutesReady", State: tc.State}
	cr := &runpb.Condition{Type: "ConfigurationsReady", State: tc.State}
	svc.Conditions = []*runpb.Condition{rr, cr}
	svc.TrafficStatuses = statuses
}

func short(name string) string { return name[strings.LastIndex(name, "/")+1:] }

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}

func (s *Server) etag() string {
	s.seq++
	return fmt.Sprintf(`W/"%d"`, s.seq)
}

func letters() string {
	const abc = "abcdefghijklmnopqrstuvwxyz"
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = abc[int(b[i])%len(abc)]
	}
	return string(b)
}

// withDefaults fills in what Cloud Run's server sets when a request
// leaves it out.
func withDefaults(project string, t *runpb.RevisionTemplate) {
	if t.MaxInstanceRequestConcurrency == 0 {
		t.MaxInstanceRequestConcurrency = 80
	}
	if t.Timeout == nil {
		t.Timeout = durationpb.New(300 * time.Second)
	}
	if t.ServiceAccount == "" {
		t.ServiceAccount = project + "-compute@developer.gserviceaccount.com"
	}
	if t.Scaling == nil {
		t.Scaling = &runpb.RevisionScaling{}
	}
	if t.Scaling.MaxInstanceCount == 0 {
		t.Scaling.MaxInstanceCount = 100
	}
	for _, c := range t.Containers {
		if len(c.Ports) == 0 && len(t.Containers) == 1 {
			c.Ports = []*runpb.ContainerPort{{Name: "http1", ContainerPort: 8080}}
		}
		if c.Resources == nil {
			c.Resources = &runpb.ResourceRequirements{CpuIdle: true}
		}
		if c.Resources.Limits == nil {
			c.Resources.Limits = map[string]string{}
		}
		if c.Resources.Limits["cpu"] == "" {
			c.Resources.Limits["cpu"] = "1000m"
		}
		if c.Resources.Limits["memory"] == "" {
			c.Resources.Limits["memory"] = "512Mi"
		}
	}
}

// templateHash identifies a revision template (its revision name aside).
func templateHash(t *runpb.RevisionTemplate) string {
	cp := proto.Clone(t).(*runpb.RevisionTemplate)
	cp.Revision = ""
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(cp)
	return string(b)
}

// parseName splits projects/P/locations/L/services/S.
func parseName(name string) (project, location, svc string, ok bool) {
	p := strings.Split(name, "/")
	if len(p) != 6 || p[0] != "projects" || p[2] != "locations" || p[4] != "services" || p[5] == "" {
		return "", "", "", false
	}
	return p[1], p[3], p[5], true
}

// write creates or replaces a service. Called with s.mu held.
func (s *Server) write(name string, in *runpb.Service, create bool) (*longrunningpb.Operation, error) {
	project, location, id, ok := parseName(name)
	if !ok {
		return nil, grpcstatus.Errorf(codes.InvalidArgument, "invalid service name %q", name)
	}
	if in.Template == nil || len(in.Template.Containers) == 0 {
		return nil, grpcstatus.Error(codes.InvalidArgument, "service.template.containers: at least one container is required")
	}
	for _, c := range in.Template.Containers {
		if c.Image == "" {
			return nil, grpcstatus.Error(codes.InvalidArgument, "service.template.containers.image: an image is required")
		}
	}
	now := s.now()
	sv := s.services[name]
	if sv != nil && sv.deleted {
		delete(s.services, name)
		sv = nil
	}
	switch {
	case create && sv != nil:
		return nil, grpcstatus.Errorf(codes.AlreadyExists, "Resource '%s' already exists.", id)
	case !create && sv == nil:
		return nil, grpcstatus.Errorf(codes.NotFound, "Resource '%s' of kind 'SERVICE' in region '%s' in project '%s' does not exist.", id, location, project)
	case !create && in.Etag != "" && in.Etag != sv.svc.Etag:
		return nil, grpcstatus.Errorf(codes.Aborted, "etag %s is not the service's current etag %s", in.Etag, sv.svc.Etag)
	}
	next := proto.Clone(in).(*runpb.Service)
	next.Name = name
	withDefaults(project, next.Template)
	if len(next.Traffic) == 0 {
		next.Traffic = []*runpb.TrafficTarget{{Type: runpb.TrafficTargetAllocationType_TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST, Percent: 100}}
	}
	total := int32(0)
	for _, t := range next.Traffic {
		total += t.Percent
	}
	if total != 100 {
		return nil, grpcstatus.Errorf(codes.InvalidArgument, "service.traffic: the percents add up to %d, not 100", total)
	}
	if sv == nil {
		next.Uid = fmt.Sprintf("%x", now.UnixNano())
		next.CreateTime = timestamppb.New(now)
		next.Generation = 1
		next.Uri = fmt.Sprintf("https://%s-%s.a.run.app", id, location)
		next.Urls = []string{next.Uri}
		sv = &service{}
	} else {
		old := sv.svc
		next.Uid, next.CreateTime, next.Uri, next.Urls = old.Uid, old.CreateTime, old.Uri, old.Urls
		next.Generation = old.Generation + 1
		next.LatestCreatedRevision, next.LatestReadyRevision = old.LatestCreatedRevision, old.LatestReadyRevision
	}
	next.UpdateTime = timestamppb.New(now)
	next.Creator, next.LastModifier = "test@example.com", "test@example.com"
	next.Etag = s.etag()
	// A revision for a new template (or the named one).
	hash := templateHash(next.Template)
	revName := next.Template.Revision
	var cur *revision
	if sv.svc != nil {
		cur = s.revisions[sv.svc.LatestCreatedRevision]
	}
	switch {
	case revName != "":
		full := name + "/revisions/" + revName
		if r := s.revisions[full]; r != nil {
			if r.hash != hash {
				return nil, grpcstatus.Errorf(codes.AlreadyExists, "Revision named '%s' with different configuration already exists.", revName)
			}
			next.LatestCreatedRevision = full
			break
		}
		s.newRevision(sv, next, full, hash, now)
	case cur == nil || cur.hash != hash:
		s.newRevision(sv, next, fmt.Sprintf("%s/revisions/%s-%05d-%s", name, id, next.Generation, letters()), hash, now)
	}
	for _, t := range next.Traffic {
		if t.Type == runpb.TrafficTargetAllocationType_TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION {
			if s.revisions[name+"/revisions/"+t.Revision] == nil {
				return nil, grpcstatus.Errorf(codes.InvalidArgument, "Revision '%s' referenced in traffic not found.", t.Revision)
			}
		}
	}
	next.Reconciling = true
	sv.svc = next
	s.services[name] = sv
	s.resolve(sv, now)
	return s.newOp(name, next.Generation, false), nil
}

func (s *Server) newRevision(sv *service, svc *runpb.Service, full, hash string, now time.Time) {
	t := svc.Template
	_, _, id, _ := parseName(svc.Name)
	rev := &runpb.Revision{
		Name: full, Uid: fmt.Sprintf("%x", now.UnixNano()), Generation: 1, Labels: maps.Clone(t.Labels), Annotations: maps.Clone(t.Annotations),
		CreateTime: timestamppb.New(now), UpdateTime: timestamppb.New(now), Service: id, Scaling: proto.Clone(t.Scaling).(*runpb.RevisionScaling),
		MaxInstanceRequestConcurrency: t.MaxInstanceRequestConcurrency, Timeout: t.Timeout, ServiceAccount: t.ServiceAccount,
		ExecutionEnvironment: t.ExecutionEnvironment, Reconciling: true, Etag: s.etag(),
		Conditions: []*runpb.Condition{{Type: "Ready", State: runpb.Condition_CONDITION_RECONCILING, LastTransitionTime: timestamppb.New(now)}},
	}
	for _, c := range t.Containers {
		rev.Containers = append(rev.Containers, proto.Clone(c).(*runpb.Container))
	}
	s.revisions[full] = &revision{rev: rev, readyAt: now.Add(s.ReadyDelay), hash: hash}
	sv.revs = append(sv.revs, full)
	svc.LatestCreatedRevision = full
}

func (s *Server) newOp(service string, gen int64, del bool) *longrunningpb.Operation {
	s.seq++
	_, loc, _, _ := parseName(service)
	project := strings.Split(service, "/")[1]
	op := &longrunningpb.Operation{Name: fmt.Sprintf("projects/%s/locations/%s/operations/op-%d", project, loc, s.seq),
		Metadata: mustAny(s.services[service].svc)}
	s.ops[op.Name] = &operation{op: op, service: service, generation: gen, delete: del}
	return proto.Clone(op).(*longrunningpb.Operation)
}

// CreateService creates a service (services.create).
func (s *Server) CreateService(_ context.Context, req *runpb.CreateServiceRequest) (*longrunningpb.Operation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	if req.ServiceId == "" || req.Service == nil {
		return nil, grpcstatus.Error(codes.InvalidArgument, "service_id and service are required")
	}
	if req.Service.Name != "" {
		return nil, grpcstatus.Error(codes.InvalidArgument, "service.name must be empty on create: the name is parent and service_id")
	}
	return s.write(req.Parent+"/services/"+req.ServiceId, req.Service, true)
}

// UpdateService replaces a service (services.patch); allow_missing creates it.
func (s *Server) UpdateService(_ context.Context, req *runpb.UpdateServiceRequest) (*longrunningpb.Operation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	if req.Service == nil {
		return nil, grpcstatus.Error(codes.InvalidArgument, "service is required")
	}
	sv := s.services[req.Service.Name]
	create := (sv == nil || sv.deleted) && req.AllowMissing
	return s.write(req.Service.Name, req.Service, create)
}

// GetService reads a service.
func (s *Server) GetService(_ context.Context, req *runpb.GetServiceRequest) (*runpb.Service, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	sv := s.services[req.Name]
	if sv == nil || sv.deleted {
		_, loc, id, _ := parseName(req.Name)
		return nil, grpcstatus.Errorf(codes.NotFound, "Resource '%s' of kind 'SERVICE' in region '%s' does not exist.", id, loc)
	}
	return proto.Clone(sv.svc).(*runpb.Service), nil
}

// ListServices lists a location's services (one page).
func (s *Server) ListServices(_ context.Context, req *runpb.ListServicesRequest) (*runpb.ListServicesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	out := &runpb.ListServicesResponse{}
	for _, name := range slices.Sorted(maps.Keys(s.services)) {
		if sv := s.services[name]; !sv.deleted && strings.HasPrefix(name, req.Parent+"/services/") {
			out.Services = append(out.Services, proto.Clone(sv.svc).(*runpb.Service))
		}
	}
	return out, nil
}

// DeleteService deletes a service and its revisions.
func (s *Server) DeleteService(_ context.Context, req *runpb.DeleteServiceRequest) (*longrunningpb.Operation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	sv := s.services[req.Name]
	if sv == nil || sv.deleted {
		return nil, grpcstatus.Errorf(codes.NotFound, "service %s not found", req.Name)
	}
	if req.Etag != "" && req.Etag != sv.svc.Etag {
		return nil, grpcstatus.Errorf(codes.Aborted, "etag %s is not the service's current etag", req.Etag)
	}
	for _, r := range sv.revs {
		delete(s.revisions, r)
	}
	sv.deleted = true
	return s.newOp(req.Name, sv.svc.Generation, true), nil
}

// GetRevision reads a revision.
func (s *Server) GetRevision(_ context.Context, req *runpb.GetRevisionRequest) (*runpb.Revision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	r := s.revisions[req.Name]
	if r == nil {
		return nil, grpcstatus.Errorf(codes.NotFound, "revision %s not found", req.Name)
	}
	return proto.Clone(r.rev).(*runpb.Revision), nil
}

// ListRevisions lists a service's revisions, newest first (one page).
func (s *Server) ListRevisions(_ context.Context, req *runpb.ListRevisionsRequest) (*runpb.ListRevisionsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	sv := s.services[req.Parent]
	out := &runpb.ListRevisionsResponse{}
	if sv == nil || sv.deleted {
		return out, nil
	}
	for i := len(sv.revs) - 1; i >= 0; i-- {
		if r := s.revisions[sv.revs[i]]; r != nil {
			out.Revisions = append(out.Revisions, proto.Clone(r.rev).(*runpb.Revision))
		}
	}
	return out, nil
}

// DeleteRevision deletes a revision that serves no traffic.
func (s *Server) DeleteRevision(_ context.Context, req *runpb.DeleteRevisionRequest) (*longrunningpb.Operation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	r := s.revisions[req.Name]
	if r == nil {
		return nil, grpcstatus.Errorf(codes.NotFound, "revision %s not found", req.Name)
	}
	svcName := req.Name[:strings.Index(req.Name, "/revisions/")]
	sv := s.services[svcName]
	for _, t := range sv.svc.TrafficStatuses {
		if t.Revision == short(req.Name) && t.Percent > 0 {
			return nil, grpcstatus.Errorf(codes.FailedPrecondition, "revision %s serves traffic", short(req.Name))
		}
	}
	delete(s.revisions, req.Name)
	sv.revs = slices.DeleteFunc(sv.revs, func(n string) bool { return n == req.Name })
	s.seq++
	op := &longrunningpb.Operation{Name: fmt.Sprintf("%s/operations/op-%d", svcName, s.seq), Done: true,
		Result: &longrunningpb.Operation_Response{Response: mustAny(r.rev)}}
	return op, nil
}

// GetOperation reads an operation.
func (s *Server) GetOperation(_ context.Context, req *longrunningpb.GetOperationRequest) (*longrunningpb.Operation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	op := s.ops[req.Name]
	if op == nil {
		return nil, grpcstatus.Errorf(codes.NotFound, "operation %s not found", req.Name)
	}
	return proto.Clone(op.op).(*longrunningpb.Operation), nil
}

// ListOperations lists the operations (one page).
func (s *Server) ListOperations(_ context.Context, _ *longrunningpb.ListOperationsRequest) (*longrunningpb.ListOperationsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	out := &longrunningpb.ListOperationsResponse{}
	names := slices.Collect(maps.Keys(s.ops))
	sort.Strings(names)
	for _, n := range names {
		out.Operations = append(out.Operations, proto.Clone(s.ops[n].op).(*longrunningpb.Operation))
	}
	return out, nil
}

// DeleteOperation forgets an operation.
func (s *Server) DeleteOperation(_ context.Context, req *longrunningpb.DeleteOperationRequest) (*emptypb.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ops, req.Name)
	return &emptypb.Empty{}, nil
}

// WaitOperation waits for an operation until it is done or the timeout
// (default 1 minute) passes, and returns it.
func (s *Server) WaitOperation(ctx context.Context, req *longrunningpb.WaitOperationRequest) (*longrunningpb.Operation, error) {
	wait := time.Minute
	if req.Timeout != nil {
		wait = req.Timeout.AsDuration()
	}
	deadline := time.Now().Add(wait)
	for {
		op, err := s.GetOperation(ctx, &longrunningpb.GetOperationRequest{Name: req.Name})
		if err != nil || op.Done || time.Now().After(deadline) {
			return op, err
		}
		select {
		case <-ctx.Done():
			return nil, grpcstatus.FromContextError(ctx.Err()).Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
