package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
)

// Identity is who sent a request: the name recorded with what it does
// (events, approvals, the audit log) and the roles it holds.
type Identity struct {
	// Name identifies the caller in events, approvals and the audit log:
	// the OS user running the server for the local token, the token's name
	// for an API token, the subject's e-mail or name for OIDC.
	Name string
	// Kind is how it authenticated: KindLocal, KindToken or KindOIDC.
	Kind string
	// Bindings are the roles it holds and where.
	Bindings []Binding
	// Session is the id of the session an OIDC identity signed in with
	// (0 for other kinds): sign-out ends it.
	Session int64
}

// Kinds of identities.
const (
	KindLocal = "local"
	KindToken = "token"
	KindOIDC  = "oidc"
	// KindSlack: a Slack user clicking a button, mapped to an identity by
	// the server's Slack users file.
	KindSlack = "slack"
)

// LocalIdentity is the identity of whoever holds the server's local token:
// an admin of everything, named "local".
var LocalIdentity = Local("local")

// Local is the identity of the server's local token, named name (the OS
// user running the server): an admin of everything, as drover dev needs no
// setup.
func Local(name string) Identity {
	return Identity{Name: name, Kind: KindLocal, Bindings: []Binding{{Role: RoleAdmin}}}
}

// Authenticator maps a request to the identity that sent it. It returns
// ErrNoCredential when the request carries no credential it understands and
// ErrBadCredential (possibly wrapped) when it carries one that is not valid.
type Authenticator interface {
	Authenticate(r *http.Request) (Identity, error)
}

var (
	// ErrNoCredential: the request carries no credential.
	ErrNoCredential = errors.New("no credential")
	// ErrBadCredential: the request carries a credential that is not valid here.
	ErrBadCredential = errors.New("invalid credential")
)

// HashToken is how a stored credential (an agent's join token) is kept:
// the hex SHA-256 of the token, spaces around it ignored.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return hex.EncodeToString(sum[:])
}

// NewToken returns a new random token for a server.
func NewToken() string { return "drover_" + rand.Text() }

// TokenAuthenticator accepts one bearer token: the server's local token.
type TokenAuthenticator struct {
	sum      [sha256.Size]byte
	identity Identity
}

var _ Authenticator = (*TokenAuthenticator)(nil)

// NewTokenAuthenticator accepts "Authorization: Bearer token" as id.
func NewTokenAuthenticator(token string, id Identity) *TokenAuthenticator {
	return &TokenAuthenticator{sum: sha256.Sum256([]byte(token)), identity: id}
}

// Authenticate compares the bearer token in constant time (over hashes, so
// the token's length does not show either).
func (a *TokenAuthenticator) Authenticate(r *http.Request) (Identity, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return Identity{}, ErrNoCredential
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Identity{}, ErrBadCredential
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	if subtle.ConstantTimeCompare(sum[:], a.sum[:]) != 1 {
		return Identity{}, ErrBadCredential
	}
	return a.identity, nil
}

type identityKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the identity of the request ctx belongs to; ok is false
// for a request that was let through without a credential (GET /v1/health).
func FromContext(ctx context.Context) (id Identity, ok bool) {
	id, ok = ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// Chain tries each Authenticator in order; the first to accept the request
// decides. It is how further kinds of credentials (API tokens per person,
// OIDC) join the local token.
type Chain []Authenticator

var _ Authenticator = Chain(nil)

// Authenticate returns the first identity an Authenticator accepts. Failing
// that, it returns the first error other than the two sentinels (a provider
// that could not be asked), else ErrBadCredential if any saw an invalid
// credential, else ErrNoCredential.
func (c Chain) Authenticate(r *http.Request) (Identity, error) {
	result := ErrNoCredential
	for _, a := range c {
		id, err := a.Authenticate(r)
		switch {
		case err == nil:
			return id, nil
		case errors.Is(err, ErrNoCredential):
		case errors.Is(err, ErrBadCredential):
			// The first refusal that says why (revoked, expired) wins
			// over a bare one.
			if errors.Is(result, ErrNoCredential) || errors.Unwrap(result) == nil {
				result = err
			}
		default:
			return Identity{}, err
		}
	}
	return Identity{}, result
}
