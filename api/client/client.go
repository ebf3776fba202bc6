// Package client is the Go client of drover's v1 API.
package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// DefaultServer is where the CLI looks when neither --server nor DROVER_SERVER is set.
const DefaultServer = "http://127.0.0.1:7420"

// DefaultTimeout bounds each request but event streams (see WithTimeout).
const DefaultTimeout = 60 * time.Second

// Client talks to a drover server.
type Client struct {
	base    string
	http    *http.Client
	token   string
	timeout time.Duration
	err     error // see WithError
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends token as the credential of every request
// (Authorization: Bearer token).
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithError makes every request fail with err before connecting: the
// caller found it cannot send its credential (the CLI refuses to send a
// token to a listener of another OS user).
func WithError(err error) Option { return func(c *Client) { c.err = err } }

// WithTimeout bounds each request, from connecting to reading the whole
// response (0 = no bound). An event stream (Watch) is bounded only until its
// response starts; after that it reconnects when the server falls silent.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithTLSConfig checks an https server with cfg (a pinned certificate,
// a CA of its own) instead of the system's roots.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(c *Client) {
		t := newTransport()
		t.TLSClientConfig = cfg
		c.http = &http.Client{Transport: t}
	}
}

// New returns a client for the server at base (e.g. http://127.0.0.1:7420),
// with a DefaultTimeout per request.
func New(base string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(base, "/"), http: &http.Client{Transport: newTransport()}, timeout: DefaultTimeout}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Error is an error returned by the server. It wraps its code, so that
// errors.Is(err, apiv1.CodeNotFound) tells what kind of error it is.
type Error struct {
	Status  int
	Code    apiv1.ErrorCode
	Message string
	Details []apiv1.ConfigError
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the error's code (nil if the server sent none).
func (e *Error) Unwrap() error {
	if e.Code == "" {
		return nil
	}
	return e.Code
}

func newError(status int, e apiv1.Error) *Error {
	return &Error{Status: status, Code: e.Code, Message: e.Message, Details: e.Details}
}

// IsNotFound reports whether err is a not_found error from the server.
func IsNotFound(err error) bool {
	return errors.Is(err, apiv1.CodeNotFound)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	parent := ctx
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.timeout, errRequestTimeout)
		defer cancel()
	}
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if c.timedOut(parent, ctx) {
			return c.timeoutError(method, path)
		}
		return fmt.Errorf("cannot reach the drover server at %s (start one with drover server or drover dev, or set --server/DROVER_SERVER): %w", c.base, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 300 && out != nil {
		// Decoded as it arrives: a list of every service can be tens of
		// megabytes, and need not be held twice.
		dec := json.NewDecoder(io.LimitReader(resp.Body, 256<<20))
		var err error
		if stream, ok := out.(serviceStream); ok {
			err = stream.decode(dec)
		} else {
			err = dec.Decode(out)
		}
		var stopped errStopped
		switch {
		case err == nil:
			return nil
		case errors.As(err, &stopped):
			return stopped.err
		case c.timedOut(parent, ctx):
			return c.timeoutError(method, path)
		}
		return fmt.Errorf("decode %s response: %w", path, err)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		if c.timedOut(parent, ctx) {
			return c.timeoutError(method, path)
		}
		return fmt.Errorf("read the response of %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var er apiv1.ErrorResponse
		if json.Unmarshal(raw, &er) != nil || er.Error.Message == "" {
			return newError(resp.StatusCode, apiv1.Error{Code: apiv1.CodeInternal, Message: fmt.Sprintf("%s %s: %s", method, path, resp.Status)})
		}
		return newError(resp.StatusCode, er.Error)
	}
	return nil
}

func servicePath(app, svc string) string {
	return "/v1/apps/" + url.PathEscape(app) + "/services/" + url.PathEscape(svc)
}

// Health checks the server.
func (c *Client) Health(ctx context.Context) (*apiv1.Health, error) {
	var out apiv1.Health
	return &out, c.do(ctx, http.MethodGet, "/v1/health", nil, &out)
}

// ApplyConfigs stores configs.
func (c *Client) ApplyConfigs(ctx context.Context, req apiv1.ApplyConfigsRequest) (*apiv1.ApplyConfigsResponse, error) {
	var out apiv1.ApplyConfigsResponse
	return &out, c.do(ctx, http.MethodPost, "/v1/configs:apply", req, &out)
}

// ListConfigs lists stored configs of kind ("" = all).
func (c *Client) ListConfigs(ctx context.Context, kind string) (*apiv1.ConfigList, error) {
	var out apiv1.ConfigList
	return &out, c.do(ctx, http.MethodGet, "/v1/configs?kind="+url.QueryEscape(kind), nil, &out)
}

// Runtimes lists the configured runtimes with what they reported about
// their backends.
func (c *Client) Runtimes(ctx context.Context) (*apiv1.RuntimeList, error) {
	var out apiv1.RuntimeList
	return &out, c.do(ctx, http.MethodGet, "/v1/runtimes", nil, &out)
}

// LinkRuntime links a runtime served by an agent and returns its join
// token (shown once) with how to start the agent.
func (c *Client) LinkRuntime(ctx context.Context, req apiv1.LinkRuntimeRequest) (*apiv1.LinkRuntimeResponse, error) {
	var out apiv1.LinkRuntimeResponse
	return &out, c.do(ctx, http.MethodPost, "/v1/runtimes:link", req, &out)
}

// RotateRuntimeToken replaces a linked runtime's join token: the old one
// stops working and its agent is disconnected.
func (c *Client) RotateRuntimeToken(ctx context.Context, name string, req apiv1.LinkRuntimeRequest) (*apiv1.LinkRuntimeResponse, error) {
	var out apiv1.LinkRuntimeResponse
	return &out, c.do(ctx, http.MethodPost, "/v1/runtimes/"+url.PathEscape(name)+":rotateToken", req, &out)
}

// UnlinkRuntime removes a linked runtime: its token stops working and its
// agent is disconnected.
func (c *Client) UnlinkRuntime(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodPost, "/v1/runtimes/"+url.PathEscape(name)+":unlink", apiv1.UnlinkRuntimeRequest{}, nil)
}

// Push creates a new desired state for a service.
func (c *Client) Push(ctx context.Context, app, svc string, req apiv1.PushRequest) (*apiv1.PushResponse, error) {
	var out apiv1.PushResponse
	return &out, c.do(ctx, http.MethodPost, servicePath(app, svc)+":push", req, &out)
}

// CreateRelease pushes several services of app as one release.
func (c *Client) CreateRelease(ctx context.Context, app string, req apiv1.ReleaseRequest) (*apiv1.Release, error) {
	var out apiv1.Release
	return &out, c.do(ctx, http.MethodPost, "/v1/apps/"+url.PathEscape(app)+"/releases", req, &out)
}

// ListReleases lists app's releases, newest first.
func (c *Client) ListReleases(ctx context.Context, app string) (*apiv1.ReleaseList, error) {
	var out apiv1.ReleaseList
	return &out, c.do(ctx, http.MethodGet, "/v1/apps/"+url.PathEscape(app)+"/releases", nil, &out)
}

// GetRelease returns one release of app.
func (c *Client) GetRelease(ctx context.Context, app, id string) (*apiv1.Release, error) {
	var out apiv1.Release
	return &out, c.do(ctx, http.MethodGet, "/v1/apps/"+url.PathEscape(app)+"/releases/"+url.PathEscape(id), nil, &out)
}

// ApproveRelease answers the approvals of every service of a release
// waiting in a release channel.
func (c *Client) ApproveRelease(ctx context.Context, app, id string, req apiv1.ReleaseApproveRequest) (*apiv1.ReleaseApproveResponse, error) {
	var out apiv1.ReleaseApproveResponse
	return &out, c.do(ctx, http.MethodPost, "/v1/apps/"+url.PathEscape(app)+"/releases/"+url.PathEscape(id)+":approve", req, &out)
}

// Status returns a service's status.
func (c *Client) Status(ctx context.Context, app, svc string) (*apiv1.ServiceStatus, error) {
	var out apiv1.ServiceStatus
	return &out, c.do(ctx, http.MethodGet, servicePath(app, svc), nil, &out)
}

// ListServices lists services with a desired state.
func (c *Client) ListServices(ctx context.Context) (*apiv1.ServiceList, error) {
	out := apiv1.ServiceList{Services: []apiv1.ServiceStatus{}}
	return &out, c.EachService(ctx, func(st *apiv1.ServiceStatus) error {
		out.Services = append(out.Services, *st)
		return nil
	})
}

// EachService passes each service of the list to fn as it arrives, without
// keeping the list (of ten thousand services, tens of megabytes) whole. An
// error of fn stops it and is returned as it is.
func (c *Client) EachService(ctx context.Context, fn func(st *apiv1.ServiceStatus) error) error {
	return c.do(ctx, http.MethodGet, "/v1/services", nil, serviceStream(fn))
}

// serviceStream decodes {"services": [...]} one service at a time.
type serviceStream func(st *apiv1.ServiceStatus) error

func (fn serviceStream) decode(dec *json.Decoder) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return err
		}
		if key != "services" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
			continue
		}
		if err := expectDelim(dec, '['); err != nil {
			return err
		}
		for dec.More() {
			var st apiv1.ServiceStatus
			if err := dec.Decode(&st); err != nil {
				return err
			}
			if err := fn(&st); err != nil {
				return errStopped{err}
			}
		}
		if err := expectDelim(dec, ']'); err != nil {
			return err
		}
	}
	return expectDelim(dec, '}')
}

// errStopped is the error of a callback, returned as it is.
type errStopped struct{ err error }

func (e errStopped) Error() string { return e.err.Error() }
func (e errStopped) Unwrap() error { return e.err }

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != want {
		return fmt.Errorf("unexpected %v, want %v", tok, want)
	}
	return nil
}

// Approve approves or rejects a channel's pending approval.
func (c *Client) Approve(ctx context.Context, app, svc string, req apiv1.ApproveRequest) (*apiv1.ServiceStatus, error) {
	var out apiv1.ServiceStatus
	return &out, c.do(ctx, http.MethodPost, servicePath(app, svc)+":approve", req, &out)
}

// Bypass lets a protection of a channel pass for one desired state.
func (c *Client) Bypass(ctx context.Context, app, svc string, req apiv1.BypassRequest) (*apiv1.ServiceStatus, error) {
	var out apiv1.ServiceStatus
	return &out, c.do(ctx, http.MethodPost, servicePath(app, svc)+":bypass", req, &out)
}

// Pause pauses a channel (or all).
func (c *Client) Pause(ctx context.Context, app, svc string, req apiv1.ChannelRequest) (*apiv1.ServiceStatus, error) {
	var out apiv1.ServiceStatus
	return &out, c.do(ctx, http.MethodPost, servicePath(app, svc)+":pause", req, &out)
}

// Resume resumes a channel (or all).
func (c *Client) Resume(ctx context.Context, app, svc string, req apiv1.ChannelRequest) (*apiv1.ServiceStatus, error) {
	var out apiv1.ServiceStatus
	return &out, c.do(ctx, http.MethodPost, servicePath(app, svc)+":resume", req, &out)
}

// Rollback rolls a channel (or all) back to the last converged version,
// or one channel to the version req.To names.
func (c *Client) Rollback(ctx context.Context, app, svc string, req apiv1.RollbackRequest) (*apiv1.RollbackResponse, error) {
	var out apiv1.RollbackResponse
	return &out, c.do(ctx, http.MethodPost, servicePath(app, svc)+":rollback", req, &out)
}

// Versions lists a service's pushed versions, newest first (at most limit;
// 0 = the server's default).
func (c *Client) Versions(ctx context.Context, app, svc string, limit int) (*apiv1.VersionList, error) {
	var out apiv1.VersionList
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	return &out, c.do(ctx, http.MethodGet, servicePath(app, svc)+"/versions?"+q.Encode(), nil, &out)
}

// Events returns a service's events after seq.
func (c *Client) Events(ctx context.Context, app, svc string, after int64, limit int, types ...string) (*apiv1.EventList, error) {
	var out apiv1.EventList
	q := url.Values{"after": {strconv.FormatInt(after, 10)}, "limit": {strconv.Itoa(limit)}}
	if len(types) > 0 {
		q.Set("type", strings.Join(types, ","))
	}
	return &out, c.do(ctx, http.MethodGet, servicePath(app, svc)+"/events?"+q.Encode(), nil, &out)
}

// Runs lists a service's runtime command runs, newest first.
func (c *Client) Runs(ctx context.Context, app, svc, rc, kind string, limit int) (*apiv1.RunList, error) {
	var out apiv1.RunList
	q := url.Values{"releaseChannel": {rc}, "kind": {kind}, "limit": {strconv.Itoa(limit)}}
	return &out, c.do(ctx, http.MethodGet, servicePath(app, svc)+"/runs?"+q.Encode(), nil, &out)
}

// Run returns one run with its output.
func (c *Client) Run(ctx context.Context, id int64) (*apiv1.Run, error) {
	var out apiv1.Run
	return &out, c.do(ctx, http.MethodGet, "/v1/runs/"+strconv.FormatInt(id, 10), nil, &out)
}

// Watch streams events of a service (or all when app and svc are empty)
// after seq, calling fn for each, until ctx ends or fn returns an error.
// It reconnects after transient failures.
func (c *Client) Watch(ctx context.Context, app, svc string, after int64, fn func(apiv1.Event) error) error {
	return c.WatchTypes(ctx, app, svc, after, nil, fn)
}

// WatchTypes is Watch for the events of the given types only (none: all).
func (c *Client) WatchTypes(ctx context.Context, app, svc string, after int64, types []string, fn func(apiv1.Event) error) error {
	for {
		err := c.watchOnce(ctx, app, svc, types, &after, fn)
		var stop *stopError
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &stop):
			return stop.err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }

func (c *Client) watchOnce(ctx context.Context, app, svc string, types []string, after *int64, fn func(apiv1.Event) error) error {
	q := url.Values{"app": {app}, "service": {svc}, "after": {strconv.FormatInt(*after, 10)}}
	if len(types) > 0 {
		q.Set("type", strings.Join(types, ","))
	}
	// A server that accepts and never answers, or a stream that falls silent
	// (the server sends a heartbeat every 15s), ends this attempt; Watch
	// connects again.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	silence := c.timeout
	if silence <= 0 {
		silence = watchSilence
	}
	timer := time.AfterFunc(silence, cancel)
	defer timer.Stop()
	req, err := c.newRequest(ctx, http.MethodGet, "/v1/watch?"+q.Encode(), nil)
	if err != nil {
		return &stopError{err}
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var er apiv1.ErrorResponse
		if json.Unmarshal(raw, &er) == nil && er.Error.Message != "" {
			return &stopError{newError(resp.StatusCode, er.Error)}
		}
		return &stopError{fmt.Errorf("watch: %s", resp.Status)}
	}
	timer.Reset(watchSilence)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		timer.Reset(watchSilence)
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev apiv1.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			continue
		}
		*after = ev.Seq
		if err := fn(ev); err != nil {
			return &stopError{err}
		}
	}
	return sc.Err()
}

// watchSilence is how long an event stream may send nothing (not even its
// heartbeat, every 15s) before the client connects again.
const watchSilence = 45 * time.Second

var errRequestTimeout = errors.New("request timed out")

// newRequest builds a request to path with the client's credential.
func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	if c.err != nil {
		return nil, c.err
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// timedOut reports whether ctx ended because of the client's own timeout
// rather than the caller's context.
func (c *Client) timedOut(parent, ctx context.Context) bool {
	return parent.Err() == nil && errors.Is(context.Cause(ctx), errRequestTimeout)
}

func (c *Client) timeoutError(method, path string) error {
	return fmt.Errorf("the drover server at %s did not answer %s %s within %s (is it overloaded or stuck? raise the limit with --request-timeout)",
		c.base, method, path, c.timeout)
}

// newTransport is http.DefaultTransport's setup with shorter connect and
// TLS handshake limits.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 10 * time.Second
	return t
}

// Freeze makes a freeze (drover freeze).
func (c *Client) Freeze(ctx context.Context, req apiv1.FreezeRequest) (*apiv1.Freeze, error) {
	var out apiv1.Freeze
	return &out, c.do(ctx, http.MethodPost, "/v1/freezes", req, &out)
}

// Unfreeze lifts freezes (drover unfreeze) and returns those it lifted.
func (c *Client) Unfreeze(ctx context.Context, req apiv1.UnfreezeRequest) (*apiv1.FreezeList, error) {
	var out apiv1.FreezeList
	return &out, c.do(ctx, http.MethodPost, "/v1/freezes:lift", req, &out)
}

// Freezes lists the freezes in force, or every one with all.
func (c *Client) Freezes(ctx context.Context, all bool) (*apiv1.FreezeList, error) {
	var out apiv1.FreezeList
	path := "/v1/freezes"
	if all {
		path += "?all=true"
	}
	return &out, c.do(ctx, http.MethodGet, path, nil, &out)
}

// Preview asks what a push with req's parameters would do, without
// pushing (drover preview).
func (c *Client) Preview(ctx context.Context, app, svc string, req apiv1.PushRequest) (*apiv1.PreviewResponse, error) {
	var out apiv1.PreviewResponse
	return &out, c.do(ctx, http.MethodPost, servicePath(app, svc)+":preview", req, &out)
}

// WhoAmI returns the identity the client's credential acts as.
func (c *Client) WhoAmI(ctx context.Context) (*apiv1.Identity, error) {
	var out apiv1.Identity
	return &out, c.do(ctx, http.MethodGet, "/v1/whoami", nil, &out)
}

// SetSecret makes a new version of secret key with value and returns it
// (never the value).
func (c *Client) SetSecret(ctx context.Context, key, value string) (*apiv1.SecretVersion, error) {
	var out apiv1.SecretVersion
	return &out, c.do(ctx, http.MethodPost, "/v1/secrets/"+url.PathEscape(key)+":set", apiv1.SetSecretRequest{Value: value}, &out)
}

// ListSecrets lists the secrets' keys and versions (never their values).
func (c *Client) ListSecrets(ctx context.Context) (*apiv1.SecretList, error) {
	var out apiv1.SecretList
	return &out, c.do(ctx, http.MethodGet, "/v1/secrets", nil, &out)
}

// DeleteSecret deletes every version of secret key, or only version
// (KEY-N) when it is not "".
func (c *Client) DeleteSecret(ctx context.Context, key, version string) (*apiv1.DeleteSecretResponse, error) {
	var out apiv1.DeleteSecretResponse
	return &out, c.do(ctx, http.MethodPost, "/v1/secrets/"+url.PathEscape(key)+":delete", apiv1.DeleteSecretRequest{Version: version}, &out)
}

// CreateToken creates an API token; the response holds the token, shown
// once.
func (c *Client) CreateToken(ctx context.Context, req apiv1.CreateTokenRequest) (*apiv1.CreateTokenResponse, error) {
	var out apiv1.CreateTokenResponse
	return &out, c.do(ctx, http.MethodPost, "/v1/tokens", req, &out)
}

// ListTokens lists the API tokens (never their values).
func (c *Client) ListTokens(ctx context.Context) (*apiv1.TokenList, error) {
	var out apiv1.TokenList
	return &out, c.do(ctx, http.MethodGet, "/v1/tokens", nil, &out)
}

// RevokeToken revokes the API token named name: requests with it are
// refused at once.
func (c *Client) RevokeToken(ctx context.Context, name string) (*apiv1.TokenInfo, error) {
	var out apiv1.TokenInfo
	return &out, c.do(ctx, http.MethodPost, "/v1/tokens/"+url.PathEscape(name)+":revoke", apiv1.RevokeTokenRequest{}, &out)
}

// ServiceSummaries lists every service the caller may read, in brief.
func (c *Client) ServiceSummaries(ctx context.Context) (*apiv1.ServiceSummaryList, error) {
	var out apiv1.ServiceSummaryList
	return &out, c.do(ctx, http.MethodGet, "/v1/services:summary", nil, &out)
}

// Parameters lists the parameters a service's pushes take.
func (c *Client) Parameters(ctx context.Context, app, svc string) (*apiv1.ParameterList, error) {
	var out apiv1.ParameterList
	return &out, c.do(ctx, http.MethodGet, "/v1/apps/"+url.PathEscape(app)+"/services/"+url.PathEscape(svc)+"/parameters", nil, &out)
}

// Compiled returns the compiled config of a service's desired state (id,
// or the active one when ""), for every release channel or only rc.
func (c *Client) Compiled(ctx context.Context, app, svc, id, rc string) (*apiv1.CompiledService, error) {
	q := url.Values{}
	if id != "" {
		q.Set("desiredStateId", id)
	}
	if rc != "" {
		q.Set("releaseChannel", rc)
	}
	path := servicePath(app, svc) + "/compiled"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out apiv1.CompiledService
	return &out, c.do(ctx, http.MethodGet, path, nil, &out)
}

// SignInInfo tells how people sign in to the server.
func (c *Client) SignInInfo(ctx context.Context) (*apiv1.SignInInfo, error) {
	var out apiv1.SignInInfo
	return &out, c.do(ctx, http.MethodGet, "/v1/auth/info", nil, &out)
}

// StartDeviceSignIn starts signing a person in through the server's
// OpenID provider (the device flow).
func (c *Client) StartDeviceSignIn(ctx context.Context) (*apiv1.DeviceSignIn, error) {
	var out apiv1.DeviceSignIn
	return &out, c.do(ctx, http.MethodPost, "/v1/auth/device", apiv1.DeviceSignInRequest{}, &out)
}

// PollDeviceSignIn asks once (the server waits up to about 20 seconds)
// whether the person finished signing in.
func (c *Client) PollDeviceSignIn(ctx context.Context, req apiv1.DeviceTokenRequest) (*apiv1.SignInResult, error) {
	var out apiv1.SignInResult
	return &out, c.do(ctx, http.MethodPost, "/v1/auth/device/token", req, &out)
}

// SignOut ends the session the client's credential is.
func (c *Client) SignOut(ctx context.Context) (*apiv1.SignOutResult, error) {
	var out apiv1.SignOutResult
	return &out, c.do(ctx, http.MethodPost, "/v1/auth/logout", apiv1.SignOutRequest{}, &out)
}

// ListSessions lists the people's sessions (never their secrets).
func (c *Client) ListSessions(ctx context.Context) (*apiv1.SessionList, error) {
	var out apiv1.SessionList
	return &out, c.do(ctx, http.MethodGet, "/v1/sessions", nil, &out)
}

// RevokeSessions ends a session, or every session of a person.
func (c *Client) RevokeSessions(ctx context.Context, req apiv1.RevokeSessionsRequest) (*apiv1.RevokeSessionsResult, error) {
	var out apiv1.RevokeSessionsResult
	return &out, c.do(ctx, http.MethodPost, "/v1/sessions:revoke", req, &out)
}

// AuditQuery selects audit records.
type AuditQuery struct {
	Application, Identity string
	Since                 time.Time
	After                 int64
	Limit                 int
}

// Audit returns a page of the audit log, oldest first.
func (c *Client) Audit(ctx context.Context, q AuditQuery) (*apiv1.AuditList, error) {
	v := url.Values{}
	if q.Application != "" {
		v.Set("app", q.Application)
	}
	if q.Identity != "" {
		v.Set("identity", q.Identity)
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if q.After > 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	path := "/v1/audit"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out apiv1.AuditList
	return &out, c.do(ctx, http.MethodGet, path, nil, &out)
}

// NotificationTargets lists where notifications go, with the counts of
// their deliveries.
func (c *Client) NotificationTargets(ctx context.Context) (*apiv1.NotificationTargetList, error) {
	var out apiv1.NotificationTargetList
	return &out, c.do(ctx, http.MethodGet, "/v1/notifications", nil, &out)
}

// SetWebhook creates or replaces webhook target name.
func (c *Client) SetWebhook(ctx context.Context, name string, req apiv1.PutNotificationTargetRequest) (*apiv1.NotificationTarget, error) {
	var out apiv1.NotificationTarget
	return &out, c.do(ctx, http.MethodPost, "/v1/notifications/"+url.PathEscape(name)+":set", req, &out)
}

// DeleteNotificationTarget removes target name.
func (c *Client) DeleteNotificationTarget(ctx context.Context, name string) (*apiv1.DeleteNotificationTargetResponse, error) {
	var out apiv1.DeleteNotificationTargetResponse
	return &out, c.do(ctx, http.MethodPost, "/v1/notifications/"+url.PathEscape(name)+":delete", apiv1.DeleteNotificationTargetRequest{}, &out)
}

// Deliveries lists the outbox's deliveries, newest first: of target (all:
// ""), in states (all: none; "failed": pending after a failed attempt, or
// dead), before id before (0: from the newest), at most limit (0: 100).
func (c *Client) Deliveries(ctx context.Context, target string, states []string, before int64, limit int) (*apiv1.DeliveryList, error) {
	q := url.Values{}
	if target != "" {
		q.Set("target", target)
	}
	for _, st := range states {
		q.Add("state", st)
	}
	if before > 0 {
		q.Set("before", strconv.FormatInt(before, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/v1/notifications/deliveries"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out apiv1.DeliveryList
	return &out, c.do(ctx, http.MethodGet, path, nil, &out)
}

// RetryDeliveries makes dead deliveries pending again.
func (c *Client) RetryDeliveries(ctx context.Context, req apiv1.RetryDeliveriesRequest) (*apiv1.RetryDeliveriesResponse, error) {
	var out apiv1.RetryDeliveriesResponse
	return &out, c.do(ctx, http.MethodPost, "/v1/notifications:retry", req, &out)
}
