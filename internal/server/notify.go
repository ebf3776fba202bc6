package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/config"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/notify"
	"github.com/drover-dev/drover/internal/store"
)

// Notifications (docs/notifications.md): the targets notifications go to
// (webhooks added through the API, the Slack channels of applications'
// configs) and the outbox the dispatcher delivers (notify.Dispatcher,
// started by Run). The outbox is written by the store with each event.

// NotifyConfig configures the server's notifications.
type NotifyConfig struct {
	// Off: this server delivers none (another server, or none, does; the
	// outbox is kept).
	Off bool
	// UIURL is the web UI's address people follow links to, and the base
	// of the events' CloudEvents source.
	UIURL string
	// Senders are the senders of target kinds beyond webhooks (Slack).
	Senders map[string]notify.Sender
	// Dispatcher settings (zero: notify's defaults).
	MaxAttempts int
	MaxBackoff  time.Duration
	// Client posts webhooks (nil: one with the defaults).
	Client   *http.Client
	Observer notify.Observer
	// Slack configures the Slack targets' messages and buttons.
	Slack SlackConfig
	// KeepDelivered is how long delivered rows stay in the outbox
	// (default 30 days); dead and pending ones stay until they are not.
	KeepDelivered time.Duration
}

// notifyWake is a channel closed at the server's next change.
func (s *Server) notifyWake() <-chan struct{} { return s.changed.wait() }

// runNotifications delivers the outbox until ctx ends.
func (s *Server) runNotifications(ctx context.Context) {
	cfg := s.notifyCfg
	if cfg.Off {
		return
	}
	client := cfg.Client
	if client == nil {
		// A redirect is not followed: the signed body would go to an
		// address nobody configured. A 3xx is a failed attempt.
		client = &http.Client{Timeout: 15 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	senders := map[string]notify.Sender{store.NotifyWebhook: &notify.Webhook{Client: client, Source: cfg.UIURL, UserAgent: "drover-notifications"}}
	if sl, err := s.slackSender(); err == nil {
		senders[store.NotifySlack] = sl
	} else {
		s.log.Warn("slack notifications off", "error", err)
	}
	for k, v := range cfg.Senders {
		senders[k] = v
	}
	owner := s.replica
	if owner == "" {
		// An API-only server has no engine name: a name of its own, as
		// claims must tell servers apart.
		owner = "api-" + rand.Text()[:12]
	}
	d := notify.New(notify.Config{
		Store: s.store, Owner: owner, Senders: senders, Describe: s.describeEvent, UIURL: cfg.UIURL,
		MaxAttempts: cfg.MaxAttempts, MaxBackoff: cfg.MaxBackoff, Observer: cfg.Observer, Log: s.log, Now: s.now,
	})
	go s.pruneDeliveries(ctx)
	d.Run(ctx, s.notifyWake)
}

// pruneDeliveries deletes, once an hour, the deliveries delivered longer
// ago than KeepDelivered.
func (s *Server) pruneDeliveries(ctx context.Context) {
	keep := s.notifyCfg.KeepDelivered
	if keep <= 0 {
		keep = 30 * 24 * time.Hour
	}
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if n, err := s.store.PruneDeliveries(ctx, s.now().Add(-keep)); err != nil && ctx.Err() == nil {
			s.log.Warn("delivered notifications not pruned", "error", err)
		} else if n > 0 {
			s.log.Info("delivered notifications pruned", "count", n, "older_than", keep.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// describeEvent is what a notification of e says beyond the event: the
// version and who pushed it, and for an approval request what it would
// roll out and the command that approves.
func (s *Server) describeEvent(ctx context.Context, e store.Event) notify.Details {
	var out notify.Details
	if e.DesiredStateID == "" {
		return out
	}
	rec, err := s.store.GetDesiredState(ctx, e.DesiredStateID)
	if err != nil {
		return out
	}
	out.PushedBy = rec.CreatedBy
	d, err := s.states.Decode(ctx, rec)
	if err != nil {
		return out
	}
	if d.Release != nil {
		out.Release = d.Release.ID
	}
	var to string
	for _, ch := range d.Channels {
		if ch.Name == e.ReleaseChannel {
			to = ds.VersionLabel(ch.Version, ch.DisplayName)
			out.Version = ch.Version
		}
	}
	if e.Type == ds.EventApprovalRequested {
		out.ApproveCommand = "drover approve " + e.Service + " --app " + e.Application + " --release-channel " + e.ReleaseChannel
		out.Preview = s.approvalSummary(ctx, e, rec, to)
	}
	return out
}

// approvalSummary says what approving e's wait rolls out: the version,
// from the one the channel runs, and the parameters pushed.
func (s *Server) approvalSummary(ctx context.Context, e store.Event, rec store.DesiredState, to string) string {
	from := "nothing yet"
	if inst, err := s.store.GetInstance(ctx, e.Application, e.Service, e.ReleaseChannel); err == nil && inst.CurrentVersion != "" {
		from = inst.CurrentVersion
	}
	msg := e.ReleaseChannel + ": " + to + " (now " + from + ")"
	var params map[string]any
	if len(rec.Params) > 0 && json.Unmarshal(rec.Params, &params) == nil && len(params) > 0 {
		names := make([]string, 0, len(params))
		for k := range params {
			names = append(names, k)
		}
		slices.Sort(names)
		msg += "; parameters " + strings.Join(names, ", ")
	}
	return msg
}

// notificationRoutes are the routes of notifications.
func (s *Server) notificationRoutes() []route {
	return []route{
		{method: "GET", path: "/v1/notifications", perm: auth.PermRead, scope: scopeGlobal, resp: apiv1.NotificationTargetList{},
			summary: "Where notifications go (webhooks, Slack channels), with the counts of their deliveries; never a secret",
			handler: func(w http.ResponseWriter, r *http.Request) {
				out, err := s.listNotificationTargets(r.Context())
				reply(w, s, out, err)
			}},
		{method: "POST", path: "/v1/notifications/{name}:set", perm: auth.PermConfigure, scope: scopeGlobal, req: apiv1.PutNotificationTargetRequest{}, resp: apiv1.NotificationTarget{},
			summary: "Create or replace a webhook target: URL, secret (sealed, never shown), filter",
			handler: handle(s, func(r *http.Request, req apiv1.PutNotificationTargetRequest) (any, error) {
				return s.putWebhook(r.Context(), r.PathValue("name"), req)
			})},
		{method: "POST", path: "/v1/notifications/{name}:delete", perm: auth.PermConfigure, scope: scopeGlobal, req: apiv1.DeleteNotificationTargetRequest{}, resp: apiv1.DeleteNotificationTargetResponse{},
			summary: "Remove a target and its deliveries not yet made",
			handler: handle(s, func(r *http.Request, _ apiv1.DeleteNotificationTargetRequest) (any, error) {
				return s.deleteNotificationTarget(r.Context(), r.PathValue("name"))
			})},
		{method: "GET", path: "/v1/notifications/deliveries", perm: auth.PermRead, scope: scopeGlobal, resp: apiv1.DeliveryList{},
			query: []queryParam{{"target", "string", "only this target's deliveries"}, {"state", "string", "only deliveries in this state (pending, delivered, dead, failed: pending after a failed attempt, or dead); repeatable"},
				{"before", "integer", "only deliveries with a smaller id (a page's next)"}, {"limit", "integer", "at most this many (1 to 1000; default 100)"}},
			summary: "The outbox: deliveries, newest first, with their state, attempts and last error",
			handler: s.listDeliveries},
		{method: "POST", path: "/v1/slack/interactions", scope: scopeOpen,
			summary: "Slack's interactivity request URL: Approve and Reject clicks, signed with the Slack app's signing secret, acting as the identity the server's Slack users file maps the clicking user to",
			handler: func(w http.ResponseWriter, r *http.Request) { s.slack.ServeHTTP(w, r) }},
		{method: "POST", path: "/v1/notifications:retry", perm: auth.PermConfigure, scope: scopeGlobal, req: apiv1.RetryDeliveriesRequest{}, resp: apiv1.RetryDeliveriesResponse{},
			summary: "Retry dead deliveries: of a target, or by id",
			handler: handle(s, func(r *http.Request, req apiv1.RetryDeliveriesRequest) (any, error) {
				n, err := s.store.RetryDeliveries(r.Context(), req.Target, req.IDs, s.now())
				if err != nil {
					return nil, err
				}
				s.changed.notify()
				return apiv1.RetryDeliveriesResponse{Retried: n}, nil
			})},
	}
}

// putWebhook creates or replaces webhook target name. A replacement
// without a secret keeps the target's.
func (s *Server) putWebhook(ctx context.Context, name string, req apiv1.PutNotificationTargetRequest) (*apiv1.NotificationTarget, error) {
	if err := store.CheckNotifyName(name); err != nil {
		return nil, statusError(apiv1.CodeInvalidArgument, err)
	}
	if strings.HasPrefix(name, SlackTargetPrefix) {
		return nil, errorf(apiv1.CodeInvalidArgument, "notification target %s: names starting with %q are the Slack targets of applications' notifications.slack", name, SlackTargetPrefix)
	}
	user, err := requestUser(ctx, "")
	if err != nil {
		return nil, err
	}
	spec := notify.WebhookSpec{URL: req.URL, Secret: req.Secret}
	old, err := s.store.GetNotifyTarget(ctx, name)
	switch {
	case err == nil && (old.Kind != store.NotifyWebhook || old.Source == "config"):
		return nil, errorf(apiv1.CodeFailedPrecondition, "notification target %s is a %s target of %s; pick another name", name, old.Kind, sourceName(old.Source))
	case err == nil && spec.Secret == "":
		var prev notify.WebhookSpec
		if json.Unmarshal(old.Spec, &prev) == nil {
			spec.Secret = prev.Secret
		}
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	if err := notify.CheckWebhook(spec); err != nil {
		return nil, errorf(apiv1.CodeInvalidArgument, "webhook %s: %v", name, err)
	}
	f := filterIn(req.Filter)
	if err := f.Check(); err != nil {
		return nil, errorf(apiv1.CodeInvalidArgument, "webhook %s: %v", name, err)
	}
	raw, err := json.Marshal(spec) //nolint:gosec // G117: the spec is sealed by the store, never answered
	if err != nil {
		return nil, err
	}
	t := store.NotifyTarget{Name: name, Kind: store.NotifyWebhook, Filter: f, Spec: raw, CreatedBy: user}
	if err := s.store.PutNotifyTarget(ctx, t); err != nil {
		return nil, err
	}
	got, err := s.store.GetNotifyTarget(ctx, name)
	if err != nil {
		return nil, err
	}
	out := targetOut(got, nil)
	return &out, nil
}

func sourceName(src string) string {
	if src == "config" {
		return "a config (drover apply)"
	}
	return "the API"
}

func (s *Server) deleteNotificationTarget(ctx context.Context, name string) (*apiv1.DeleteNotificationTargetResponse, error) {
	t, err := s.store.GetNotifyTarget(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(apiv1.CodeNotFound, "no notification target %s (drover notifications lists them)", name)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case t.Source == "config" && t.Kind == store.NotifySlack:
		return nil, errorf(apiv1.CodeFailedPrecondition, "notification target %s comes from application %s's notifications.slack: remove it there and drover apply", name, firstOr(t.Filter.Applications, "?"))
	case t.Source == "config":
		return nil, errorf(apiv1.CodeFailedPrecondition, "notification target %s comes from a webhook config (webhook: {name: %s}): it is managed by drover apply", name, name)
	}
	if err := s.store.DeleteNotifyTarget(ctx, name); err != nil {
		return nil, err
	}
	return &apiv1.DeleteNotificationTargetResponse{Name: name}, nil
}

func firstOr(list []string, def string) string {
	if len(list) > 0 {
		return list[0]
	}
	return def
}

func (s *Server) listNotificationTargets(ctx context.Context) (*apiv1.NotificationTargetList, error) {
	list, err := s.store.ListNotifyTargets(ctx)
	if err != nil {
		return nil, err
	}
	counts, err := s.store.CountDeliveries(ctx)
	if err != nil {
		return nil, err
	}
	out := &apiv1.NotificationTargetList{Targets: []apiv1.NotificationTarget{}}
	for _, t := range list {
		out.Targets = append(out.Targets, targetOut(t, counts))
	}
	return out, nil
}

// targetOut is t as the API shows it: never a secret, a webhook's URL
// without its query.
func targetOut(t store.NotifyTarget, counts []store.DeliveryCount) apiv1.NotificationTarget {
	out := apiv1.NotificationTarget{Name: t.Name, Kind: t.Kind, Filter: filterOut(t.Filter), Source: t.Source, CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt}
	if out.Source == "" {
		out.Source = "api"
	}
	switch t.Kind {
	case store.NotifyWebhook:
		var spec notify.WebhookSpec
		if json.Unmarshal(t.Spec, &spec) == nil {
			out.URL = displayURL(spec.URL)
		}
	case store.NotifySlack:
		var spec struct{ Channel, ErrorChannel string }
		if json.Unmarshal(t.Spec, &spec) == nil {
			out.Channel, out.ErrorChannel = spec.Channel, spec.ErrorChannel
		}
	}
	for _, c := range counts {
		if c.Target != t.Name {
			continue
		}
		switch c.State {
		case store.DeliveryPending:
			out.Pending = c.Count
		case store.DeliveryDelivered:
			out.Delivered = c.Count
		case store.DeliveryDead:
			out.Dead = c.Count
		}
	}
	return out
}

// displayURL is raw without its query and fragment (they may hold tokens).
func displayURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	u.Fragment = ""
	return u.String()
}

func filterIn(f apiv1.NotificationFilter) store.NotifyFilter {
	return store.NotifyFilter{Types: f.Types, Applications: f.Applications, Services: f.Services, Channels: f.ReleaseChannels, Statuses: f.Statuses}
}

func filterOut(f store.NotifyFilter) apiv1.NotificationFilter {
	return apiv1.NotificationFilter{Types: f.Types, Applications: f.Applications, Services: f.Services, ReleaseChannels: f.Channels, Statuses: f.Statuses}
}

// listDeliveries answers GET /v1/notifications/deliveries.
func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.DeliveryFilter{Target: q.Get("target"), Limit: 100}
	failed := false
	for _, st := range q["state"] {
		switch st {
		case "pending", "delivered", "dead":
			f.States = append(f.States, store.DeliveryState(st))
		case "failed":
			failed = true
			f.States = append(f.States, store.DeliveryPending, store.DeliveryDead)
		default:
			writeError(w, s, errorf(apiv1.CodeInvalidArgument, "state %q: give pending, delivered, dead or failed", st))
			return
		}
	}
	for _, p := range []struct {
		name string
		dst  *int64
		max  int64
	}{{"before", &f.BeforeID, 1 << 62}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 || n > p.max {
				writeError(w, s, errorf(apiv1.CodeInvalidArgument, "%s %q: give a positive integer", p.name, v))
				return
			}
			*p.dst = n
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, s, errorf(apiv1.CodeInvalidArgument, "limit %q: give 1 to 1000", v))
			return
		}
		f.Limit = n
	}
	list, err := s.store.ListDeliveries(r.Context(), f)
	if err != nil {
		writeError(w, s, err)
		return
	}
	out := apiv1.DeliveryList{Deliveries: []apiv1.Delivery{}}
	for _, d := range list {
		if failed && d.State == store.DeliveryPending && d.LastError == "" {
			continue // not tried yet, or deferred: not a failure
		}
		out.Deliveries = append(out.Deliveries, deliveryOut(d))
	}
	if len(list) == f.Limit {
		out.Next = list[len(list)-1].ID
	}
	reply(w, s, out, nil)
}

func deliveryOut(d store.Delivery) apiv1.Delivery {
	return apiv1.Delivery{
		ID: d.ID, Target: d.Target, Type: d.Type, CloudEventType: notify.CloudEventType(d.Type), State: string(d.State),
		Attempts: d.Attempts, NextAttemptAt: nextOf(d), LastError: d.LastError, CreatedAt: d.CreatedAt, DeliveredAt: d.DeliveredAt,
		EventSeq: d.EventSeq, Application: d.Event.Application, Service: d.Event.Service, ReleaseChannel: d.Event.ReleaseChannel, Message: d.Event.Message,
	}
}

func nextOf(d store.Delivery) time.Time {
	if d.State != store.DeliveryPending {
		return time.Time{}
	}
	return d.NextAt
}

// webhookTargets are the targets of the webhook configs among incoming,
// their secrets read from the secret store; an error names the file and
// field of what is wrong. Targets the API made are not replaced.
func (s *Server) webhookTargets(ctx context.Context, incoming []*config.Source, user string) ([]store.NotifyTarget, error) {
	var out []store.NotifyTarget
	var errs config.ErrorList
	for _, src := range incoming {
		w := src.File.Webhook
		if w == nil {
			continue
		}
		old, err := s.store.GetNotifyTarget(ctx, w.Name)
		switch {
		case err == nil && (old.Source != "config" || old.Kind != store.NotifyWebhook):
			errs = append(errs, src.Errorf("webhook.name", "the notification target %s exists, made by drover notifications add: remove it first (drover notifications remove %s) or pick another name", w.Name, w.Name))
			continue
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
		r := &secretResolver{ctx: ctx, store: s.store, values: map[string]string{}}
		secret, ok := r.value("webhook", w.Secret)
		if !ok {
			for _, e := range r.errs {
				errs = append(errs, src.Errorf("webhook.secret", "%s", strings.TrimPrefix(e, "webhook.secret: ")))
			}
			continue
		}
		spec := notify.WebhookSpec{URL: w.URL, Secret: secret}
		if err := notify.CheckWebhook(spec); err != nil {
			field, msg, _ := strings.Cut(err.Error(), ": ")
			errs = append(errs, src.Errorf("webhook."+field, "%s", msg))
			continue
		}
		raw, err := json.Marshal(spec) //nolint:gosec // G117: the spec is sealed by the store, never answered
		if err != nil {
			return nil, err
		}
		out = append(out, store.NotifyTarget{Name: w.Name, Kind: store.NotifyWebhook, Source: "config", Spec: raw, CreatedBy: user,
			Filter: store.NotifyFilter{Types: w.Events, Applications: w.Applications, Services: w.Services, Channels: w.ReleaseChannels, Statuses: w.Statuses}})
	}
	if len(errs) > 0 {
		return nil, &validationError{details: toDetails(errs.Err())}
	}
	return out, nil
}
