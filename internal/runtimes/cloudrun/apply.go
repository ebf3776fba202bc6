package cloudrun

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/drover-dev/drover/internal/cloudrunspec"
	"github.com/drover-dev/drover/internal/runtimes"
)

// Apply creates or replaces the instance's Cloud Run service. It does not
// wait for the long-running operation: the poller follows the service.
func (r *Runtime) Apply(ctx context.Context, t runtimes.Target) (runtimes.ApplyResult, error) {
	o, desired, err := r.parse(&t)
	if err != nil {
		return runtimes.ApplyResult{}, err
	}
	unlock := r.poller.LockApply(t.InstanceKey)
	defer unlock()
	r.poller.Touch(t, seen{key: t.InstanceKey, obj: o, desired: desired})
	res, err := r.apply(ctx, t.InstanceKey, o, desired)
	r.poller.Applied(t.InstanceKey) // read again: the apply changed it
	if err == nil {
		r.poller.Notify(t.InstanceKey)
	}
	return res, err
}

func (r *Runtime) apply(ctx context.Context, key runtimes.InstanceKey, o cloudrunspec.Object, desired *runpb.Service) (runtimes.ApplyResult, error) {
	object := "Service " + o.ServiceName
	live, err := r.services.GetService(ctx, &runpb.GetServiceRequest{Name: desired.Name})
	switch {
	case status.Code(err) == codes.NotFound:
		create := proto.Clone(desired).(*runpb.Service)
		create.Name = ""
		if _, err := r.services.CreateService(ctx, &runpb.CreateServiceRequest{Parent: r.parent(), ServiceId: o.ServiceName, Service: create}); err != nil {
			return runtimes.ApplyResult{}, classify(fmt.Errorf("create Cloud Run service %s: %w", o.ServiceName, err))
		}
		return runtimes.ApplyResult{Changes: []runtimes.Change{{Object: object, Action: runtimes.ActionCreated}}}, nil
	case err != nil:
		return runtimes.ApplyResult{}, classify(fmt.Errorf("read Cloud Run service %s: %w", o.ServiceName, err))
	}
	if why := owner(key, o, live.Annotations); why != "" {
		return runtimes.ApplyResult{}, runtimes.Permanent(errors.New(why))
	}
	// A version a ready revision of the instance runs already: serve that
	// revision again (rollback) rather than build a new one.
	if desired.Template.Revision == "" {
		if name, err := r.readyRevisionOf(ctx, live, desired); err != nil {
			return runtimes.ApplyResult{}, classify(err)
		} else if name != "" {
			desired = proto.Clone(desired).(*runpb.Service)
			desired.Template.Revision = name
			object += " (revision " + name + ")"
		}
	}
	latestIsIt := desired.Template.Revision == "" || short(live.LatestCreatedRevision) == desired.Template.Revision
	if latestIsIt && live.Annotations[cloudrunspec.AnnotationVersion] == desired.Annotations[cloudrunspec.AnnotationVersion] &&
		live.Annotations[cloudrunspec.AnnotationSpec] == desired.Annotations[cloudrunspec.AnnotationSpec] && drift(desired, live) == "" {
		return runtimes.ApplyResult{Changes: []runtimes.Change{{Object: object, Action: runtimes.ActionUnchanged}}}, nil
	}
	update := proto.Clone(desired).(*runpb.Service)
	update.Etag = live.Etag
	if _, err := r.services.UpdateService(ctx, &runpb.UpdateServiceRequest{Service: update}); err != nil {
		return runtimes.ApplyResult{}, classify(fmt.Errorf("replace Cloud Run service %s: %w", o.ServiceName, err))
	}
	return runtimes.ApplyResult{Changes: []runtimes.Change{{Object: object, Action: runtimes.ActionConfigured}}}, nil
}

// readyRevisionOf returns the name of a ready revision of live that runs
// exactly what desired asks for (the instance, version and spec), unless
// it is the latest created revision already ("" for none).
func (r *Runtime) readyRevisionOf(ctx context.Context, live, desired *runpb.Service) (string, error) {
	want := desired.Template.Annotations
	it := r.revisions.ListRevisions(ctx, &runpb.ListRevisionsRequest{Parent: live.Name, PageSize: 50})
	for range 50 {
		rev, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("list revisions of Cloud Run service %s: %w", short(live.Name), err)
		}
		a := rev.Annotations
		if a[cloudrunspec.AnnotationInstance] != want[cloudrunspec.AnnotationInstance] || a[cloudrunspec.AnnotationVersion] != want[cloudrunspec.AnnotationVersion] ||
			a[cloudrunspec.AnnotationSpec] != want[cloudrunspec.AnnotationSpec] {
			continue
		}
		if c := ready(rev.Conditions); c == nil || c.State != runpb.Condition_CONDITION_SUCCEEDED {
			continue
		}
		if rev.Name == live.LatestCreatedRevision {
			return "", nil
		}
		return short(rev.Name), nil
	}
	return "", nil
}

// classify marks the API's refusals of what was asked as errors that
// retrying does not fix; unavailability, throttling, a stale etag and
// timeouts are retried by the engine with backoff (the client retries
// UNAVAILABLE itself).
func classify(err error) error {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.FailedPrecondition, codes.AlreadyExists, codes.OutOfRange, codes.Unimplemented:
		return runtimes.Permanent(err)
	default:
		return err
	}
}
