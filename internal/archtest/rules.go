package archtest

// Rules are the import arrows that must never exist (issue 10, item 7;
// docs/architecture.md). To enable a pending rule, delete its Pending line.
var Rules = []Rule{
	{
		Name: "engine-is-pure",
		From: []string{"internal/engine/..."},
		Deny: []string{
			"internal/runtimes", "internal/server", "internal/runtimehost", "internal/daemon", "api", "net/http", "os/exec",
		},
		// Every runtime below internal/runtimes is denied, the next one too;
		// the interface package is what the engine calls.
		Allow: []string{"internal/runtimes"},
		Why:   "the engine decides and imports no runtime implementation, server or transport; the composition root wires them",
	},
	{
		Name: "engine-without-compiler",
		From: []string{"internal/engine/..."},
		Deny: []string{"internal/compiler"},
		Why:  "the engine reads desiredstate, not the compiler (kustomize, Helm)",
	},
	{
		Name: "engine-without-config",
		From: []string{"internal/engine/..."},
		Deny: []string{"internal/config"},
		Why:  "the engine reads desiredstate, not config files",
	},
	{
		Name: "compiler-is-an-adapter",
		From: []string{"internal/compiler/..."},
		Deny: []string{"internal/store", "internal/runtimes", "internal/runtimehost", "internal/engine"},
		Why:  "the compiler turns configs into desired states and knows no storage, runtime or engine",
	},
	{
		Name:  "compiler-names-gates-by-their-spec",
		From:  []string{"internal/compiler/..."},
		Deny:  []string{"internal/alerts", "internal/gitcheck"},
		Allow: []string{"internal/alerts/alertspec", "internal/gitcheck/commitspec"},
		Why:   "the compiler writes a gate's spec (a leaf package) and never reaches its evaluator (HTTP clients, git)",
	},
	{
		Name:   "gates-is-a-leaf",
		From:   []string{"internal/gates"},
		Deny:   []string{"internal"},
		Allow:  []string{"internal/desiredstate"},
		Why:    "the evaluator door is imported by the engine, the server and every gate kind, and imports none of them (only the model it evaluates)",
		Direct: true,
	},
	{
		Name: "kubernetes-object-rules-are-a-leaf",
		From: []string{"internal/kubeobj"},
		Deny: []string{"internal", "k8s.io", "sigs.k8s.io", "helm.sh"},
		Why:  "the rules both the Kubernetes runtime and the compiler check stay free of either's dependencies",
	},
	{
		Name: "cli-is-an-api-client",
		From: []string{"internal/cli/..."},
		Deny: []string{"internal/server", "internal/engine", "internal/store", "internal/daemon", "internal/runtimehost"},
		Why:  "the CLI talks to a server through the API; the verbs that run one live in internal/daemon",
	},
	{
		Name: "store-below-engine",
		From: []string{"internal/store/..."},
		Deny: []string{"internal/engine"},
		Why:  "the store keeps what the engine decides and does not call it",
	},
	{
		Name: "desiredstate-is-a-model",
		From: []string{"internal/desiredstate/..."},
		Deny: []string{"internal/store"},
		Why:  "desiredstate is the model the compiler emits and the store persists",
	},
	{
		Name: "state-is-a-model",
		From: []string{"internal/state"},
		Deny: []string{"internal/store", "internal/engine", "internal/runtimes", "internal/server"},
		Why:  "the engine's state records are a model the engine decides on and the store persists",
	},
	{
		Name: "server-has-no-backend",
		From: []string{"internal/server/...", "internal/runtimehost"},
		Deny: []string{"internal/runtimes", "internal/daemon"},
		// The interface package, the agents' transport, and the helpers
		// that end a crashed process's commands and redact secrets; every
		// backend below internal/runtimes is denied, the next one too.
		Allow: []string{"internal/runtimes", "internal/runtimes/remote", "internal/runtimes/localexec", "internal/runtimes/redact"},
		Why:   "runtime kinds are chosen by the composition root (runtimehost/builtin)",
	},
	{
		Name:   "requests-reach-no-runtime",
		From:   []string{"internal/server/..."},
		Deny:   []string{"internal/runtimes", "internal/runtimehost"},
		Why:    "people's requests never reach a runtime: status reads the observations the engine stored (the engine, whose model the server uses, may import runtimes)",
		Direct: true,
	},
	{
		Name: "runtimehost-below-server-and-engine",
		From: []string{"internal/runtimehost/..."},
		Deny: []string{"internal/server", "internal/engine", "internal/daemon"},
		Why:  "an agent hosts the same runtime host without a server or an engine",
	},
	{
		Name: "runtimes-without-compiler",
		From: []string{"internal/runtimes/..."},
		Deny: []string{"internal/compiler"},
		Why:  "a runtime reads the compiled objects of its spec package (ecsspec, customspec), not the compiler, which brings Helm and kustomize",
	},
	{
		Name: "runtimehost-and-agent-without-compiler",
		From: []string{"internal/runtimehost/...", "internal/agent/..."},
		Deny: []string{"internal/compiler"},
		Why:  "the runtime host and the agent build runtimes from config.RuntimeKind facts and spec packages; compiling is the server's",
	},
	{
		Name:   "agent-without-store",
		From:   []string{"internal/agent/..."},
		Deny:   []string{"internal/store"},
		Why:    "the agent has no database: what it records goes to the server over its stream",
		Direct: true,
	},
	{
		Name:    "agent-has-no-database",
		From:    []string{"internal/agent/..."},
		Deny:    []string{"internal/store"},
		Why:     "the agent has no database; today it reaches the store's record types through runtimehost.Store and the server side of internal/runtimes/remote (Hub), which move out of its imports next",
		Pending: true,
	},
}
