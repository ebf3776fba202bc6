package terraform

import "github.com/drover-dev/drover/internal/runtimes/iacrun"

// Limits of what is copied from one module directory (iacrun.Sync). The
// module is read on the host that runs terraform, from a directory the
// service config names, so whoever may configure a service chooses it:
// these keep a module from filling the data directory and from holding the
// sync for long.
const (
	// MaxModuleBytes caps the total size of a module's files.
	MaxModuleBytes = iacrun.MaxBytes
	// MaxModuleEntries caps the files and directories of a module.
	MaxModuleEntries = iacrun.MaxEntries
)

// ModuleRootFlag is the flag of drover server and drover agent that allows a
// directory for module paths; errors name it.
const ModuleRootFlag = "--program-root"

// lockFile is the dependency lock file: copied when the module has one, left
// to terraform init otherwise.
const lockFile = ".terraform.lock.hcl"

// moduleLimits are the rules of a module copy: in roots, nothing from
// exclude, and terraform's own files at the top (.terraform/, the local
// backend's state, the lock file when the module has none) never copied
// from the source nor deleted from the copy, so the local backend's state
// lives in the copy and survives every sync; .git and .terraform are not
// copied, at any depth.
func moduleLimits(roots, exclude []string) iacrun.Limits {
	return iacrun.Limits{
		Roots:   roots,
		Exclude: exclude,
		Owned: map[string]bool{
			".terraform":                   true, // providers, modules, backend config
			"terraform.tfstate":            true,
			"terraform.tfstate.backup":     true,
			".terraform.tfstate.lock.info": true,
			"terraform.tfstate.d":          true, // workspaces of the local backend
		},
		OwnedUnlessCopied: map[string]bool{lockFile: true},
		Skip:              map[string]bool{".git": true, ".terraform": true},
		Noun:              "module",
		RootFlag:          ModuleRootFlag,
	}
}

// syncModule makes dst a copy of the module at src (iacrun.Sync) and
// returns the hash of its content.
func syncModule(src, dst string, lim iacrun.Limits) (string, error) {
	return iacrun.Sync(src, dst, lim)
}
