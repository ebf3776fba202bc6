// Package state declares the engine's state records: an instance's
// durable state and the results of its checks, the approvals people gave,
// the events of the history and what the engine observed of an instance.
// The engine decides on them and the store persists them (package store
// keeps aliases of these names); it imports no storage, runtime or engine.
package state
