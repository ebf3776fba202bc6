// Package compiler turns the configs of one service into what drover
// converges: for every release channel of its application, a self-contained
// compiled config, and from those the desired state the engine reads.
//
// # Inputs and outputs
//
// The input (Input, built from a config.Set by InputFor) is the service's
// application, service and runtime configs, the protections and delivery
// extensions they name, the parameter values of one push, and the facts
// runtimes reported about their clusters. Local files the configs refer to
// were read when the configs were loaded (package config); the compiler reads
// no files of its own, reads no store and calls no runtime, so the same input
// always compiles to the same output (golden_test.go holds it to that).
//
// The output is a Result: one CompiledReleaseChannel per channel, in the
// channels' order, with its selected runtime, rendered runtime objects
// (Kubernetes manifests, Helm releases, ECS task definitions, custom runtime
// commands), environment, protections, extensions and preconditions.
// Result.Engine gives the engine-facing form (desiredstate.Compiled) that a
// push stores, and Result.Redacted the form shown to people, every secret
// replaced. Problems come back as Errors, each naming its object and field,
// and every problem of a compilation is reported, not only the first.
//
// # Files by concern
//
//   - compile.go: the types above, Compile and the per-channel compiler
//     (rcCompiler) that the other files extend.
//   - validate.go: InputFor, and ValidateSet, which compiles every service of
//     a config set as configs:apply does.
//   - groups.go: release channel groups expanded into channels by runtime
//     labels; merge.go: perReleaseChannel merged over the service.
//   - runtime_select.go: which runtime a channel's service runs on and
//     which backends a runtime kind accepts; custom_runtime.go: commands of
//     custom runtimes; kubernetes_config.go, helm.go (and helm_process*.go,
//     charts rendered in a bounded child process) and ecs.go: the other
//     service backends.
//   - protections.go: protections and their commands attached to a channel;
//     extensions.go: delivery extensions and their order.
//   - params.go: push-time parameters and their types; envinject.go: the
//     environment Prodvana injects into containers; display_name.go: the
//     name people know a version by.
//   - template.go, template_limits.go, template_secrets.go, fmt_verbs.go,
//     fmt_bound.go: templates, with bounds on time and memory, and secret
//     parameters that may only be output whole.
//   - desired.go and engine_form.go: the desired state and the engine's form;
//     redact.go: the redacted form; echo.go and names.go: bounded error
//     messages, name checks and "did you mean" suggestions.
//
// # What it must never import
//
// The compiler is an adapter from config to model: it must not import the
// store, any runtime (internal/runtimes/...), the runtime host, the engine,
// the server or the API (internal/archtest and the depguard rules of
// .golangci.yml check the first four). Runtime facts come in through Input,
// and nothing the compiler produces depends on where it runs.
package compiler
