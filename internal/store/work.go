package store

import (
	"errors"
	"time"
)

// ErrLeaseHeld is returned by ClaimLease when another owner holds the lease
// and it has not expired.
var ErrLeaseHeld = errors.New("lease held by another owner")

// ErrFenced is returned by a write fenced by a lease (or a task claim) that
// its holder no longer has: another owner claimed it since, or it was
// released. Nothing is written.
var ErrFenced = errors.New("fenced out: the lease or task claim was lost")

// Lease is one owner's claim on a key (the engine leases service keys, so
// that one engine at a time plans a service) until Expires.
type Lease struct {
	Key   string `json:"key"`
	Owner string `json:"owner"`
	// Token is the fencing token: it increases every time the key is
	// claimed by an owner that did not hold it. Writes fenced with a token
	// older than the stored one are refused with ErrFenced.
	Token   int64     `json:"token"`
	Expires time.Time `json:"expires"`
}

// Fence makes a write conditional on a lease still being held: the stored
// token of Key must equal Token (a lease that merely expired, and that
// nobody claimed since, still fences correctly: nobody else acted).
type Fence struct {
	Key   string
	Token int64
}

// TaskStatus is where a durable task stands.
type TaskStatus string

// Task statuses. Pending and running tasks are open; at most one task per
// Key and Instance is open at a time.
const (
	TaskPending   TaskStatus = "pending"
	TaskRunning   TaskStatus = "running"
	TaskSucceeded TaskStatus = "succeeded"
	TaskFailed    TaskStatus = "failed"
)

// Open reports whether the task still has to run or is running.
func (s TaskStatus) Open() bool { return s == TaskPending || s == TaskRunning }

// Task is a durable piece of work (an apply, later a check): enqueued in
// the same transaction as the plan that decides it, then claimed by a
// runner, heartbeated while it runs and completed with its outcome. A task
// whose runner stops heartbeating is claimed again once its claim expires.
type Task struct {
	// ID is assigned by the store.
	ID int64 `json:"id"`
	// Key is the service key the task belongs to ("app/service"); Instance
	// what it acts on within it (a release channel).
	Key      string `json:"key"`
	Instance string `json:"instance"`
	// Kind says what the task does; Payload how (opaque to the store).
	Kind    string     `json:"kind"`
	Payload []byte     `json:"payload,omitempty"`
	Status  TaskStatus `json:"status"`
	// Owner and Token identify the current claim: Token increases with
	// every claim, and heartbeats and completion must present it.
	Owner string `json:"owner,omitempty"`
	Token int64  `json:"token,omitempty"`
	// Attempts counts the claims (a task claimed again after its runner
	// died has Attempts > 1).
	Attempts int `json:"attempts"`
	// Expires is when the running claim lapses without a heartbeat.
	Expires    time.Time `json:"expires,omitzero"`
	CreatedAt  time.Time `json:"createdAt"`
	ClaimedAt  time.Time `json:"claimedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	// Message is the outcome's explanation.
	Message string `json:"message,omitempty"`
}

// TaskFilter selects tasks; zero fields match everything.
type TaskFilter struct {
	Key string
	// Open selects pending and running tasks only.
	Open bool
	// Limit caps the number returned (0 = no limit); oldest first.
	Limit int
}

// KeepFinishedTasks is how many finished tasks per key and instance the
// store keeps (newest first); older ones are deleted as tasks complete.
const KeepFinishedTasks = 10
