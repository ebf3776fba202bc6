// Package runtimehost hosts the configured runtimes of one process: it builds
// each runtime from its stored config on first use, rebuilds it when that
// config changes, runs the watches of runtimes that push changes (reporting
// each changed instance to a callback), records the commands runtimes run
// (runs) and the process groups they start, and ends, when it starts, the
// process groups an earlier process left running.
//
// The server uses a Host today, as the engine's runtime source and to answer
// status; an agent would host the same thing behind the streams it opens. It
// imports neither the server nor the engine, and no runtime backend: the
// kinds it can build come in its Config (see package builtin).
package runtimehost
