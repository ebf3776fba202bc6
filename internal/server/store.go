package server

import "github.com/drover-dev/drover/internal/store"

// Store is what the server needs of the store: every role but the engine's
// work (leases and tasks) and the runtime host's process records. A
// store.Store is one.
type Store interface {
	store.Configs
	store.DesiredStates
	store.Approvals
	store.Instances
	store.Events
	store.Facts
	store.Agents
	store.Tokens
	store.Sessions
	store.Audit
	store.Secrets
	store.Notifications
	store.Runs
	store.Health
}

// Identities is what a SessionAuthenticator reads: sessions, and the
// tokens a browser's local sign-in depends on.
type Identities interface {
	store.Sessions
	store.Tokens
}
