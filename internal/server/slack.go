package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/notify/slack"
	"github.com/drover-dev/drover/internal/state"
	"github.com/drover-dev/drover/internal/store"
)

// Slack (docs/notifications.md): the Slack channels of an application's
// notifications.slack are notification targets drover apply keeps
// (slack.APP for channel, slack.APP.errors for errorChannel); messages are
// posted with the bot token kept as the secret slack-bot-token. Approval
// requests carry Approve and Reject buttons; Slack posts the clicks to
// POST /v1/slack/interactions, signed with the app's signing secret (the
// secret slack-signing-secret), and the clicking Slack user acts as the
// drover identity the users file (--slack-users) maps them to, with the
// roles it gives.

// SlackTargetPrefix starts the names of the Slack targets of applications'
// configs: slack.APP and slack.APP.errors (application names hold no dot,
// so no two applications' names meet). Other targets may not use it.
const SlackTargetPrefix = "slack."

// ownSlackTarget reports whether t is a Slack target of application app's
// config, which its apply may replace or remove.
func ownSlackTarget(t store.NotifyTarget, app string) bool {
	return t.Source == "config" && t.Kind == store.NotifySlack && slices.Equal(t.Filter.Applications, []string{app})
}

// slackInteractionsPath is where Slack posts the clicks.
const slackInteractionsPath = "/v1/slack/interactions"

// Secret keys of the Slack app.
//
//nolint:gosec // G101: the names of secrets, not their values
const (
	SlackTokenSecret   = "slack-bot-token"
	SlackSigningSecret = "slack-signing-secret"
)

// SlackConfig configures Slack.
type SlackConfig struct {
	// APIURL is Slack's Web API, ending in "/" (default slack.com's); a
	// payload's response_url may be on its host too.
	APIURL string
	// UsersFile maps Slack users to drover identities and their roles
	// (SlackUsers, YAML); read at each click.
	UsersFile string
	// HTTPClient calls Slack (nil: one with a timeout).
	HTTPClient *http.Client
}

// SlackUsers is the file that maps Slack users to drover identities.
type SlackUsers struct {
	Users []SlackUser `json:"users"`
}

// SlackUser maps one Slack user (of one workspace, or of any) to the drover
// identity their clicks act as, with the roles it holds then.
type SlackUser struct {
	// Slack is the Slack user ID (U0123ABCD), Team the workspace's
	// (T0123ABCD; empty: any).
	Slack string `json:"slack"`
	Team  string `json:"team,omitempty"`
	// Identity is the drover identity: approvals are recorded under it,
	// and quorums count it once, whichever way it approves.
	Identity string `json:"identity"`
	// Roles are ROLE[@APP[/CHANNEL]] bindings (approver@shop).
	Roles []string `json:"roles"`
}

// readSlackUsers reads and checks the users file.
func readSlackUsers(path string) (map[string]SlackUser, map[string][]auth.Binding, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var f SlackUsers
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	users, roles := map[string]SlackUser{}, map[string][]auth.Binding{}
	for i, u := range f.Users {
		where := fmt.Sprintf("%s: users[%d]", path, i)
		if u.Slack == "" || u.Identity == "" {
			return nil, nil, fmt.Errorf("%s: slack and identity are required", where)
		}
		for _, r := range u.Roles {
			b, err := auth.ParseBinding(r)
			if err != nil {
				return nil, nil, fmt.Errorf("%s.roles: %w", where, err)
			}
			roles[u.Identity] = append(roles[u.Identity], b)
		}
		users[u.Team+"/"+u.Slack] = u
	}
	return users, roles, nil
}

// CheckSlackUsers reads the users file at path and says what is wrong with
// it (the server checks it at start).
func CheckSlackUsers(path string) error {
	_, _, err := readSlackUsers(path)
	return err
}

// latestSecret is the value of the newest version of secret key.
func (s *Server) latestSecret(ctx context.Context, key string) (string, error) {
	list, err := s.store.ListSecrets(ctx)
	if err != nil {
		return "", err
	}
	version := int64(-1)
	for _, sec := range list {
		if sec.Key == key {
			version = max(version, sec.Version)
		}
	}
	if version < 0 {
		// Not store.ErrNotFound: a delivery waiting for it is retried
		// until it is set.
		return "", fmt.Errorf("the secret %s is not set (drover secrets set %s --from-stdin)", key, key)
	}
	sec, err := s.store.GetSecret(ctx, key, version)
	if err != nil {
		return "", err
	}
	return string(sec.Value), nil
}

// slackSender is the sender of Slack targets.
func (s *Server) slackSender() (*slack.Sender, error) {
	api := s.notifyCfg.Slack.APIURL
	if api != "" && !strings.HasSuffix(api, "/") {
		api += "/"
	}
	return slack.NewSender(slack.SenderConfig{
		Token:      func(ctx context.Context) (string, error) { return s.latestSecret(ctx, SlackTokenSecret) },
		APIURL:     api,
		HTTPClient: s.notifyCfg.Slack.HTTPClient,
	})
}

// newSlackInteractions is the handler of POST /v1/slack/interactions.
func (s *Server) newSlackInteractions() http.Handler {
	cfg := s.notifyCfg.Slack
	allowURL := slack.ResponseURL
	if api, err := url.Parse(cfg.APIURL); err == nil && cfg.APIURL != "" {
		allowURL = func(u *url.URL) bool {
			return slack.ResponseURL(u) || (u.Scheme == api.Scheme && u.Host == api.Host)
		}
	}
	h, err := slack.NewInteractions(slack.InteractionsConfig{
		SigningSecret: func(ctx context.Context) (string, error) { return s.latestSecret(ctx, SlackSigningSecret) },
		Identity: func(_ context.Context, team, user string) (string, bool) {
			if cfg.UsersFile == "" {
				return "", false
			}
			users, _, err := readSlackUsers(cfg.UsersFile)
			if err != nil {
				s.log.Warn("slack users file unreadable", "error", err)
				return "", false
			}
			u, ok := users[team+"/"+user]
			if !ok {
				u, ok = users["/"+user]
			}
			return u.Identity, ok
		},
		Decide:           s.slackDecide,
		HTTPClient:       cfg.HTTPClient,
		AllowResponseURL: allowURL,
		UnmappedHint: func(team, user string) string {
			return fmt.Sprintf("A drover admin maps you in the server's --slack-users file: `{slack: %s, team: %s, identity: YOU, roles: [approver@APP]}`", user, team)
		},
		Log: s.log,
	})
	if err != nil {
		panic(err) // the config above is complete
	}
	return h
}

// slackDecide records a click of identity as the API records an approval
// or rejection: with the roles the users file gives it, audited.
func (s *Server) slackDecide(ctx context.Context, identity string, d slack.Decision) (slack.Outcome, error) {
	_, roles, err := readSlackUsers(s.notifyCfg.Slack.UsersFile)
	if err != nil {
		return slack.Outcome{}, fmt.Errorf("the server's Slack users file: %w", err)
	}
	ctx = auth.WithIdentity(ctx, auth.Identity{Name: identity, Kind: auth.KindSlack, Bindings: roles[identity]})
	rec := store.AuditRecord{Identity: identity, IdentityKind: auth.KindSlack, Action: "POST /v1/slack/interactions", Source: "slack:" + d.SlackTeamID + "/" + d.SlackUserID,
		Application: d.Application, Service: d.Service, ReleaseChannel: d.ReleaseChannel, Status: http.StatusOK, Outcome: "ok"}
	st, err := s.slackApprove(ctx, d)
	if err != nil {
		rec.Outcome, rec.Message, rec.Status = string(codeOf(err)), err.Error(), http.StatusConflict
	}
	if _, aerr := s.store.AppendAudit(context.WithoutCancel(ctx), rec); aerr != nil {
		s.log.Warn("audit record not written", "action", rec.Action, "error", aerr)
	}
	if err != nil {
		if codeOf(err) == apiv1.CodeAlreadyExists {
			return slack.Outcome{}, fmt.Errorf("%s: %w", err.Error(), slack.ErrAlreadyDecided)
		}
		return slack.Outcome{}, err
	}
	verb := "approved"
	if !d.Approve {
		verb = "rejected"
	}
	out := slack.Outcome{Text: verb + " by " + identity, Final: !d.Approve}
	if ch := findStatusChannel(st, d.ReleaseChannel); ch != nil {
		for _, a := range ch.Approvals {
			if d.Approve && slices.Contains(a.ApprovedBy, identity) {
				out.Text = fmt.Sprintf("approved by %s (%d of %d)", strings.Join(a.ApprovedBy, ", "), len(a.ApprovedBy), a.MinApprovers)
			}
		}
		out.Final = out.Final || ch.Status != "WAITING_MANUAL_APPROVAL"
	}
	return out, nil
}

func (s *Server) slackApprove(ctx context.Context, d slack.Decision) (*apiv1.ServiceStatus, error) {
	if err := allow(ctx, auth.PermApprove, d.Application, d.ReleaseChannel); err != nil {
		return nil, err
	}
	return s.approve(ctx, d.Application, d.Service, apiv1.ApproveRequest{ReleaseChannel: d.ReleaseChannel, DesiredStateID: d.DesiredStateID,
		Reject: !d.Approve, Comment: "from Slack"})
}

func findStatusChannel(st *apiv1.ServiceStatus, rc string) *apiv1.ChannelStatus {
	if st == nil {
		return nil
	}
	for i := range st.ReleaseChannels {
		if st.ReleaseChannels[i].Name == rc {
			return &st.ReleaseChannels[i]
		}
	}
	return nil
}

// codeOf is the API error code of err (internal for others).
func codeOf(err error) apiv1.ErrorCode {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.code
	}
	return apiv1.CodeInternal
}

// slackTargets are the targets an application's notifications.slack makes:
// slack.APP for its channel (every notification), slack.APP.errors for
// its errorChannel (failed channels).
func slackTargets(app *config.Application) (keep []store.NotifyTarget, drop []string) {
	name, errName := SlackTargetPrefix+app.Name, SlackTargetPrefix+app.Name+".errors"
	var sl config.SlackNotifications
	if app.Notifications != nil && app.Notifications.Slack != nil {
		sl = *app.Notifications.Slack
	}
	add := func(target, channel string, types []string) {
		if channel == "" {
			drop = append(drop, target)
			return
		}
		spec, _ := json.Marshal(slack.Spec{Channel: channel})
		keep = append(keep, store.NotifyTarget{Name: target, Kind: store.NotifySlack, Source: "config", Spec: spec,
			Filter: store.NotifyFilter{Applications: []string{app.Name}, Types: types}})
	}
	add(name, sl.Channel, nil)
	add(errName, sl.ErrorChannel, []string{state.NotifyChannelFailed})
	return keep, drop
}

// checkSlackTargets refuses an apply whose applications' Slack targets
// would replace targets the API made.
func (s *Server) checkSlackTargets(ctx context.Context, incoming []*config.Source) error {
	for _, src := range incoming {
		if src.File.Application == nil {
			continue
		}
		keep, _ := slackTargets(src.File.Application)
		for _, t := range keep {
			old, err := s.store.GetNotifyTarget(ctx, t.Name)
			if err == nil && !ownSlackTarget(old, src.File.Application.Name) {
				return errorf(apiv1.CodeFailedPrecondition, "%s: application.notifications.slack makes the notification target %s, which drover notifications add made; remove that one first (drover notifications remove %s)", src.Path, t.Name, t.Name)
			}
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
	}
	return nil
}

// syncSlackTargets makes the Slack targets of the applications applied, and
// removes those their configs no longer name.
func (s *Server) syncSlackTargets(ctx context.Context, incoming []*config.Source, user string) error {
	for _, src := range incoming {
		if src.File.Application == nil {
			continue
		}
		keep, drop := slackTargets(src.File.Application)
		for _, t := range keep {
			t.CreatedBy = user
			if err := s.store.PutNotifyTarget(ctx, t); err != nil {
				return fmt.Errorf("%s: notification target %s: %w", src.Path, t.Name, err)
			}
		}
		for _, name := range drop {
			old, err := s.store.GetNotifyTarget(ctx, name)
			if err != nil || !ownSlackTarget(old, src.File.Application.Name) {
				continue
			}
			if err := s.store.DeleteNotifyTarget(ctx, name); err != nil && !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("%s: notification target %s: %w", src.Path, name, err)
			}
		}
	}
	return nil
}
