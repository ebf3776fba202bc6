// Package auth is the server's HTTP edge: which requests reach the API at all,
// and who sent them.
//
// A Guard checks every request in a fixed order: the Host header must name
// this server (against DNS rebinding), a present Origin must be this server
// (against cross-site pages), a mutating request must be application/json
// (so a browser cannot send it as a "simple" request without a preflight),
// and the request must carry a credential an Authenticator accepts. The
// Identity it yields travels in the request context (FromContext).
//
// Today there is one kind of credential: the local token, generated at the
// server's first start in its data directory (LoadOrCreateToken) and recorded
// for the same OS user under the user's config directory keyed by the address
// the server listens on (RecordServerToken), where the CLI finds it
// (FindServerToken), and sends only to a listener of the same user
// (CheckListenerOwner, on Linux). Richer identities (API tokens per person, OIDC, roles and
// per-route permissions) plug in as further Authenticators and Identity fields.
package auth
