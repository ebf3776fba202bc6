package iacrun

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/kubejob"
)

// Factory is a runtimehost factory: it builds the runtime of a config.
type Factory = func(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error)

// FactoryOf makes a constructor of a concrete runtime a Factory (a failed
// constructor gives a nil interface, not a nil pointer in one).
func FactoryOf[R runtimes.Runtime](build func(cfg *config.Runtime, opts runtimes.Options) (R, error)) Factory {
	return func(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
		r, err := build(cfg, opts)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// JobsFactoryOf is the Factory of runtimes whose commands run as Jobs in
// the cluster of kubeconfig and kubeContext (both "": the in-cluster
// configuration): check vets the config before the cluster's client is
// made (which does not contact the cluster), build makes the runtime.
func JobsFactoryOf[R runtimes.Runtime](kubeconfig, kubeContext string, check func(*config.Runtime) error,
	build func(cfg *config.Runtime, opts runtimes.Options, runner *kubejob.Runner) (R, error)) Factory {
	return FactoryOf(func(cfg *config.Runtime, opts runtimes.Options) (R, error) {
		var zero R
		if err := check(cfg); err != nil {
			return zero, err
		}
		runner, err := kubejob.Connect(kubeconfig, kubeContext, opts.Log)
		if err != nil {
			return zero, fmt.Errorf("runtime %s: %w", cfg.Name, err)
		}
		return build(cfg, opts, runner)
	})
}

// HostLimits are the Limits of sources on this host: in roots (the values
// of flag, resolved), never in or around the data directories, at most
// maxBytes and maxEntries (0: MaxBytes and MaxEntries). noun names the
// source in errors.
func HostLimits(noun, flag string, roots []string, maxBytes int64, maxEntries int, dataDirs ...string) (Limits, error) {
	resolved, err := ResolveRoots(roots, flag)
	if err != nil {
		return Limits{}, err
	}
	exclude, err := ExcludeDirs(dataDirs...)
	if err != nil {
		return Limits{}, err
	}
	return Limits{Roots: resolved, Exclude: exclude, MaxBytes: maxBytes, MaxEntries: maxEntries, Noun: noun, RootFlag: flag}, nil
}

// Settings are a host's rules for the sources of the runtimes it builds
// (the flags of drover server and drover agent).
type Settings struct {
	// Roots are the directories a source directory (the object's path),
	// and every file copied from it after symbolic links, must lie in.
	// None: no source directory on this host is allowed.
	Roots []string
	// MaxBytes and MaxEntries cap what is copied of one source (0: the
	// package's MaxBytes and MaxEntries).
	MaxBytes   int64
	MaxEntries int
}

// FindBinary finds a tool's binary: $env (a path, or a name looked up on
// PATH), else the first of names on PATH, made absolute; none is missing.
func FindBinary(env string, missing error, names ...string) (string, error) {
	if p := os.Getenv(env); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w", env, p, err)
		}
		return filepath.Abs(path)
	}
	for _, name := range names {
		if path, err := exec.LookPath(name); err == nil {
			return filepath.Abs(path)
		}
	}
	return "", missing
}
