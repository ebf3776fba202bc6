package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/store"
)

// API tokens: a person's or a robot's credential, with the roles it holds.
// The server hands a token out once, at creation, and keeps its hash; a
// request carrying it acts as the token's name. Revoking one refuses it at
// once, on every server sharing the store: each request looks its token
// up.

// tokenName is what a token may be named: an identity as events and
// approvals show it (already in the form usertext.User gives names).
var tokenName = regexp.MustCompile(`^[a-z0-9][a-z0-9._@+-]{0,63}$`)

// BootstrapTokenName is the name of the first admin token.
const BootstrapTokenName = "admin"

func (s *Server) createToken(ctx context.Context, req apiv1.CreateTokenRequest) (*apiv1.CreateTokenResponse, error) {
	noteAudit(ctx, "token "+req.Name)
	if !tokenName.MatchString(req.Name) {
		return nil, errorf(apiv1.CodeInvalidArgument, "token name %q: use 1 to 64 lower-case letters, digits and . _ @ + - (starting with a letter or digit); it is the identity the token acts as", req.Name)
	}
	if len(req.Roles) == 0 {
		return nil, errorf(apiv1.CodeInvalidArgument, "a token needs at least one role: ROLE, ROLE@APPLICATION or ROLE@APPLICATION/RELEASE_CHANNEL (roles: viewer, deployer, approver, admin)")
	}
	roles := make([]string, 0, len(req.Roles))
	for _, r := range req.Roles {
		b, err := auth.ParseBinding(r)
		if err != nil {
			return nil, statusError(apiv1.CodeInvalidArgument, err)
		}
		roles = append(roles, b.String())
	}
	if !req.ExpiresAt.IsZero() && !req.ExpiresAt.After(s.now()) {
		return nil, errorf(apiv1.CodeInvalidArgument, "expiresAt %s is not in the future", req.ExpiresAt.UTC().Format(time.RFC3339))
	}
	token := auth.NewToken()
	t, err := s.store.CreateAPIToken(ctx, store.APIToken{Name: req.Name, Hash: auth.HashToken(token), Roles: roles,
		CreatedBy: actor(ctx), ExpiresAt: req.ExpiresAt.UTC()})
	if errors.Is(err, store.ErrConflict) {
		return nil, errorf(apiv1.CodeAlreadyExists, "a token named %s exists: revoke it first (drover tokens revoke %s), or choose another name", req.Name, req.Name)
	}
	if err != nil {
		return nil, err
	}
	return &apiv1.CreateTokenResponse{Token: token, Info: s.tokenInfo(t)}, nil
}

func (s *Server) listTokens(ctx context.Context) (*apiv1.TokenList, error) {
	list, err := s.store.ListAPITokens(ctx)
	if err != nil {
		return nil, err
	}
	out := &apiv1.TokenList{Tokens: make([]apiv1.TokenInfo, 0, len(list))}
	for _, t := range list {
		out.Tokens = append(out.Tokens, s.tokenInfo(t))
	}
	return out, nil
}

func (s *Server) revokeToken(ctx context.Context, name string) (*apiv1.TokenInfo, error) {
	noteAudit(ctx, "token "+name)
	t, err := s.store.RevokeAPIToken(ctx, name, actor(ctx))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(apiv1.CodeNotFound, "no token named %s is in force (drover tokens list shows them)", name)
	}
	if err != nil {
		return nil, err
	}
	info := s.tokenInfo(t)
	return &info, nil
}

// tokenInfo is what the API shows of t.
func (s *Server) tokenInfo(t store.APIToken) apiv1.TokenInfo {
	state := "active"
	switch {
	case !t.RevokedAt.IsZero():
		state = "revoked"
	case !t.ExpiresAt.IsZero() && !s.now().Before(t.ExpiresAt):
		state = "expired"
	}
	roles := t.Roles
	if roles == nil {
		roles = []string{}
	}
	return apiv1.TokenInfo{Name: t.Name, Roles: roles, CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt,
		RevokedAt: t.RevokedAt, RevokedBy: t.RevokedBy, LastUsedAt: t.LastUsedAt, State: state}
}

// Bootstrap creates the first admin token, named admin, on a store that
// never had a token, with the value token. It reports whether it created
// one: a store with tokens (revoked ones too), or a token another server
// sharing the store created meanwhile, is left as it is.
func Bootstrap(ctx context.Context, st store.Tokens, token string) (bool, error) {
	list, err := st.ListAPITokens(ctx)
	if err != nil || len(list) > 0 {
		return false, err
	}
	_, err = st.CreateAPIToken(ctx, store.APIToken{Name: BootstrapTokenName, Hash: auth.HashToken(token),
		Roles: []string{string(auth.RoleAdmin)}, CreatedBy: "drover"})
	if errors.Is(err, store.ErrConflict) {
		return false, nil
	}
	return err == nil, err
}

// TokenAuthenticator accepts the API tokens kept in a store.
type TokenAuthenticator struct {
	store store.Tokens
	now   func() time.Time
	// last writes each token's last use, once a minute at most.
	last lastUse
}

var _ auth.Authenticator = (*TokenAuthenticator)(nil)

// touchEvery is how often a token's last use is written.
const touchEvery = time.Minute

// NewTokenAuthenticator accepts "Authorization: Bearer TOKEN" for the API
// tokens of st (now nil = time.Now).
func NewTokenAuthenticator(st store.Tokens, now func() time.Time) *TokenAuthenticator {
	if now == nil {
		now = time.Now
	}
	return &TokenAuthenticator{store: st, now: now}
}

// Authenticate looks the bearer token's hash up: a revoked or expired
// token is refused, saying so.
func (a *TokenAuthenticator) Authenticate(r *http.Request) (auth.Identity, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return auth.Identity{}, auth.ErrNoCredential
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return auth.Identity{}, auth.ErrBadCredential
	}
	t, err := a.store.APITokenByHash(r.Context(), auth.HashToken(token))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return auth.Identity{}, auth.ErrBadCredential
	case err != nil:
		return auth.Identity{}, fmt.Errorf("look the token up: %w", err)
	}
	now := a.now()
	switch {
	case !t.RevokedAt.IsZero():
		return auth.Identity{}, fmt.Errorf("%w: the token %s was revoked by %s at %s", auth.ErrBadCredential, t.Name, t.RevokedBy, t.RevokedAt.Format(time.RFC3339))
	case !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt):
		return auth.Identity{}, fmt.Errorf("%w: the token %s expired at %s", auth.ErrBadCredential, t.Name, t.ExpiresAt.Format(time.RFC3339))
	}
	id := auth.Identity{Name: t.Name, Kind: auth.KindToken}
	for _, r := range t.Roles {
		b, err := auth.ParseBinding(r)
		if err != nil {
			// Stored by an older or newer server: skip what this one
			// does not know rather than grant it.
			continue
		}
		id.Bindings = append(id.Bindings, b)
	}
	a.touch(r.Context(), t.ID, now)
	return id, nil
}

// touch records the token's use, at most once per touchEvery.
func (a *TokenAuthenticator) touch(ctx context.Context, id int64, now time.Time) {
	a.last.touch(ctx, fmt.Sprintf("token %d", id), now, func(ctx context.Context) error { return a.store.TouchAPIToken(ctx, id, now) })
}

// lastUse writes when a credential was last used, at most once per
// touchEvery per credential. A failed write is not the request's: it is
// tried again at the next.
type lastUse struct {
	mu      sync.Mutex
	touched map[string]time.Time
}

func (l *lastUse) touch(ctx context.Context, key string, now time.Time, write func(context.Context) error) {
	l.mu.Lock()
	last, ok := l.touched[key]
	due := !ok || now.Sub(last) >= touchEvery
	if due {
		if l.touched == nil {
			l.touched = map[string]time.Time{}
		}
		l.touched[key] = now
	}
	l.mu.Unlock()
	if !due {
		return
	}
	if err := write(context.WithoutCancel(ctx)); err != nil {
		l.mu.Lock()
		delete(l.touched, key)
		l.mu.Unlock()
	}
}
