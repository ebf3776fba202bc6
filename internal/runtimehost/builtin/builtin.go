// Package builtin lists the runtime kinds built into drover. Only the
// composition root (and tests) import it, so that the server, the engine and
// the runtime host import no runtime backend.
package builtin

import (
	"context"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimehost"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/cloudrun"
	"github.com/drover-dev/drover/internal/runtimes/custom"
	"github.com/drover-dev/drover/internal/runtimes/ecs"
	"github.com/drover-dev/drover/internal/runtimes/fake"
	"github.com/drover-dev/drover/internal/runtimes/kubernetes"
	"github.com/drover-dev/drover/internal/runtimes/lambda"
	"github.com/drover-dev/drover/internal/runtimes/pulumi"
	"github.com/drover-dev/drover/internal/runtimes/terraform"
)

// Settings are a host's rules for the runtimes it builds: the flags of
// drover server and drover agent.
type Settings struct {
	// ProgramRoots are the directories the programs of runner kinds (a
	// terraformRunner's modules, a pulumiRunner's programs) may be in,
	// symbolic links resolved (nil: the working directory).
	ProgramRoots []string
}

// Registry returns the factories of the runtime kinds built into drover
// with the default Settings.
func Registry() runtimehost.Registry {
	reg, err := RegistryWith(Settings{})
	if err != nil {
		// The defaults resolve only the working directory; a host that
		// cannot has its runners refuse every program instead.
		return registry()
	}
	return reg
}

// RegistryWith returns the factories of the runtime kinds built into
// drover: one for each kind config registers (config.RuntimeKinds), the
// half of a kind that needs its implementation, the runners' with s's
// program roots. It fails when a root cannot be resolved.
func RegistryWith(s Settings) (runtimehost.Registry, error) {
	resolve := terraform.DefaultModuleRoots
	if len(s.ProgramRoots) > 0 {
		resolve = func() ([]string, error) { return terraform.ResolveModuleRoots(s.ProgramRoots) }
	}
	roots, err := resolve()
	if err != nil {
		return nil, err
	}
	reg := registry()
	reg[config.KindTerraformRunner] = terraform.FactoryWith(terraform.Settings{ModuleRoots: roots})
	reg[config.KindPulumiRunner] = pulumi.FactoryWith(pulumi.Settings{Roots: roots})
	return reg, nil
}

// Jobs returns, for the kinds whose commands an agent in Kubernetes mode
// runs as Jobs in its cluster, what builds a runtime of the kind that
// does (agent.Config.Jobs).
func Jobs() map[string]func(kubeconfig, kubeContext string) runtimehost.Factory {
	return map[string]func(kubeconfig, kubeContext string) runtimehost.Factory{
		config.KindCustom: func(kubeconfig, kubeContext string) runtimehost.Factory {
			return custom.JobsFactory(kubeconfig, kubeContext)
		},
		config.KindTerraformRunner: func(kubeconfig, kubeContext string) runtimehost.Factory {
			return terraform.JobsFactory(kubeconfig, kubeContext)
		},
		config.KindPulumiRunner: func(kubeconfig, kubeContext string) runtimehost.Factory {
			return pulumi.JobsFactory(kubeconfig, kubeContext)
		},
	}
}

func registry() runtimehost.Registry {
	return runtimehost.Registry{
		config.KindFake:            fakeWithChecks,
		config.KindCustom:          custom.Factory,
		config.KindTerraformRunner: terraform.Factory,
		config.KindPulumiRunner:    pulumi.Factory,
		config.KindKubernetes:      kubernetesWithChecks,
		config.KindAwsEcs:          ecsWithChecks,
		config.KindAwsLambda:       lambdaWithChecks,
		config.KindGoogleCloudRun:  cloudRunWithChecks,
	}
}

// ecsWithChecks builds an ECS runtime whose release channels' protection
// and extension commands run on this host, through a custom runtime of
// the same name (ECS has no place to run them).
func ecsWithChecks(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
	e, err := ecs.New(context.Background(), cfg, opts)
	if err != nil {
		return nil, err
	}
	local, err := custom.New(&config.Runtime{Name: cfg.Name, Custom: &config.CustomRuntime{}}, opts)
	if err != nil {
		_ = e.Close()
		return nil, err
	}
	e.SetCheckRunner(local)
	return e, nil
}

// lambdaWithChecks builds a Lambda runtime whose release channels'
// protection and extension commands run on this host, through a custom
// runtime of the same name (Lambda has no place to run them).
func lambdaWithChecks(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
	l, err := lambda.New(context.Background(), cfg, opts)
	if err != nil {
		return nil, err
	}
	local, err := custom.New(&config.Runtime{Name: cfg.Name, Custom: &config.CustomRuntime{}}, opts)
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	l.SetCheckRunner(local)
	return l, nil
}

// cloudRunWithChecks builds a Cloud Run runtime whose release channels'
// protection and extension commands run on this host, through a custom
// runtime of the same name (Cloud Run has no place to run them).
func cloudRunWithChecks(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
	r, err := cloudrun.New(context.Background(), cfg, opts)
	if err != nil {
		return nil, err
	}
	local, err := custom.New(&config.Runtime{Name: cfg.Name, Custom: &config.CustomRuntime{}}, opts)
	if err != nil {
		_ = r.Close()
		return nil, err
	}
	r.SetCheckRunner(local)
	return r, nil
}

// kubernetesWithChecks builds a Kubernetes runtime whose release channels'
// protection and extension commands run as Jobs on its cluster, in the
// namespace drover-proxy-runtime-<runtime>, through a custom runtime of the
// same name whose commands run as Jobs.
func kubernetesWithChecks(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
	k, err := kubernetes.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	kubeconfig, kubeContext := "", ""
	if cfg.Kubernetes != nil {
		kubeconfig, kubeContext = cfg.Kubernetes.Kubeconfig, cfg.Kubernetes.Context
	}
	jobs, err := custom.NewJobs(&config.Runtime{Name: cfg.Name, Custom: &config.CustomRuntime{ProxyRuntime: &config.ProxyRuntime{Runtime: cfg.Name}}}, kubeconfig, kubeContext, opts)
	if err != nil {
		_ = k.Close()
		return nil, err
	}
	k.SetCheckRunner(jobs)
	return k, nil
}

// fakeWithChecks builds a fake runtime whose release channels' protection
// and extension commands run on this host, through a custom runtime of the
// same name (the fake runtime simulates a backend; its checks are real).
func fakeWithChecks(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
	f, err := fake.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	local, err := custom.New(&config.Runtime{Name: cfg.Name, Custom: &config.CustomRuntime{}}, opts)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	f.SetCheckRunner(local)
	return f, nil
}
