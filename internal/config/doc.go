// Package config reads drover's config files (`*.pvn.yaml`, Prodvana's
// format, unchanged) into Go values and checks them, reporting every problem
// with its file, line, column and field path.
//
// # Inputs and outputs
//
// The input is files: the paths given to `drover validate` or `drover apply`
// (Discover, Load), or one file's bytes (Decode; DecodeInternal for configs
// the server stored, whose local references were already resolved). A
// Source is one decoded file with where it came from; a Set (NewSet) indexes
// the sources of one invocation by kind and name and is what validation, the
// compiler (package compiler) and the server work from. Set.Validate
// returns an ErrorList of located Errors; no error is ever silently ignored:
// a Prodvana field drover does not implement has the type Unsupported and is
// refused, and drover's additions carry the `drover:"extension"` tag.
//
// Local references (Kubernetes YAML and kustomize trees, Helm charts and
// values, ECS task definitions) are read at load time, on the machine that
// runs the CLI, confined to the config's own tree, and embedded in the
// Source, so that no later stage reads the file system.
//
// # Files by concern
//
//   - types.go: the config kinds, field by field as Prodvana names them;
//     scalars.go: durations, Unsupported and the other scalar types;
//     timewindow.go: deploy windows.
//   - decode.go: decoding by reflection over the YAML node tree, with
//     positions, snake_case keys, aliases and "did you mean" hints;
//     errors.go: Position, Error and ErrorList; clip.go: values clipped
//     before they are quoted in a message.
//   - load.go: discovering and loading files and resolving their local
//     references; localfs*.go: the confined reading of those references;
//     kustomize_tree.go: what a kustomization refers to on disk.
//   - set.go: Set and ServiceKey.
//   - validate.go, validate_alerts.go, validate_intervals.go: checks across
//     a set (names, references, runtimes, backends, alert gates, intervals);
//     registry.go: container registry hosts.
//   - schema/: the JSON Schema generated from these types for editors.
//
// # What it must never import
//
// config is the bottom of the config path: it must not import the compiler,
// the desired-state model, the store, the engine, any runtime, the runtime
// host, the server or the API. The engine must not import config either
// (internal/archtest: engine-without-config); it reads the compiled form in
// internal/desiredstate.
package config
