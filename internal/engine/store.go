package engine

import "github.com/drover-dev/drover/internal/store"

// Store is what the engine needs of the store: its shared work (leases and
// tasks), the instances it converges and their observations, the desired
// states and approvals it plans from, the events it appends, and the
// freezes it reads among the configs. A store.Store is one.
type Store interface {
	store.Work
	store.Instances
	store.DesiredStates
	store.Approvals
	store.Events
	store.Configs
}

// ExecutorStore is what a LocalExecutor reads: the instances it acts on
// (their runtime memos) and the desired states their targets come from.
type ExecutorStore interface {
	store.Instances
	store.DesiredStates
}
