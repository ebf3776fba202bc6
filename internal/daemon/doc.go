// Package daemon is drover's composition root: it opens the data directory
// (its lock and the SQLite store), wires the runtime host, the convergence
// engine and the API server into a Node, and holds the verbs that run one:
// drover server, drover dev and drover bench (Commands). cmd/drover adds
// them to the CLI's root. Nothing else builds these pieces.
package daemon
