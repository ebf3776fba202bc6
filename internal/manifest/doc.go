// Package manifest turns Kubernetes YAML text into generic objects, applies
// Prodvana-style patches to them, and renders kustomize directories held in
// memory.
//
// The compiler renders Go templates over the raw file text for each release
// channel and then calls, in order:
//
//   - [RenderKustomize] for a kustomize directory (see [IsKustomizationDir]),
//     which builds the kustomization of a file tree held in memory with the
//     kustomize Go API (written to a private temporary directory, so that
//     any name a file system allows works, as with `kustomize build`) and
//     returns a multi-document YAML stream;
//   - [DecodeApplicable] ([Decode] and the rules of package kubeobj), which
//     splits a multi-document YAML stream into [Object]s;
//   - [ApplyPatches], which applies JSON6902 "replace" patches;
//   - [Encode], which prints objects as a canonical YAML stream for display.
//
// # Data model
//
// An [Object] is JSON-compatible generic data. Values are only ever
//
//	map[string]any, []any, string, bool, nil, int64 and float64
//
// Numbers follow one canonical rule everywhere in this package (Decode,
// ApplyPatches, and patch values): a number whose value is integral and fits
// in an int64 is an int64; any other finite number is a float64. So
// `replicas: 3` decodes to int64(3), `replicas: 3.0` also decodes to
// int64(3) (JSON cannot tell them apart: both print as 3), `ratio: 0.5` is
// float64(0.5), and a patch value int64(5) or float64(5) is stored as
// int64(5). json.Marshal prints integers without a decimal point or
// exponent, so the JSON of a decoded object is canonical and survives any
// number of round-trips unchanged. Integers beyond the int64 range become
// float64 (and lose precision, as they would in Kubernetes). NaN and
// infinities (.nan, .inf) are rejected because JSON cannot express them.
//
// # YAML dialect
//
// Scalars resolve exactly as sigs.k8s.io/yaml (and therefore kubectl)
// resolves them, which is YAML 1.1 as implemented by go-yaml v2:
//
//   - quoted and block (| and >) scalars are always strings: "1.10" and
//     '3' stay strings;
//   - plain 1.10 is the float 1.1, plain 010 is the octal integer 8, 0x1F is
//     31, 1_000 is 1000;
//   - plain y, Y, yes, on, n, no, off (any of their usual casings) are
//     booleans, as are true and false; ~, null and the empty value are null;
//   - timestamps such as 2024-01-02 stay strings (they are never turned into
//     time values);
//   - explicit tags such as !!str 10 or !!int "10" are honoured; !!binary is
//     rejected; unknown tags (such as !foo) leave the scalar a string.
//
// Unlike sigs.k8s.io/yaml, this package is strict where silently guessing
// would change a deployment: mapping keys must be strings (yes: or 1: as a
// key is an error asking for quotes, rather than becoming "true" or "1"), and
// duplicate keys in one mapping are an error rather than "last one wins".
// Anchors, aliases and merge keys (<<) are supported; explicit keys win over
// merged ones. Alias expansion is bounded, so hostile input ("billion
// laughs") yields an error instead of exhausting memory.
//
// Parsing is done with gopkg.in/yaml.v3, which reports syntax errors with a
// line only; Decode locates the offending character itself, so every *Error
// carries a 1-based line and column.
//
// # Kustomize
//
// [RenderKustomize] uses sigs.k8s.io/kustomize/api/krusty with the same
// defaults as `kustomize build`: builtin plugins only (no exec or container
// functions, no Helm), files may only be loaded from within the
// kustomization root (bases are fine), and the legacy resource order unless
// the kustomization sets sortOptions. Remote resources (git URLs, http(s)
// URLs, file:// URLs) are rejected before kustomize runs, because kustomize
// would otherwise shell out to git or fetch over HTTP at compile time: in
// the kustomization, the local bases and components it uses, and the
// configs of its generators, transformers and validators (kustomize loads
// their paths too). [RenderKustomizeDir] asks its caller's check about
// each instead, so the CLI can allow some (--allow-path URL).
// kustomize keeps its OpenAPI schema in process-global state, so renders are
// serialized by a package mutex.
package manifest
