package cli

import "github.com/spf13/pflag"

// addAllowPathFlag adds --allow-path to a verb that reads configs.
func addAllowPathFlag(f *pflag.FlagSet, dirs *[]string) {
	f.StringArrayVar(dirs, "allow-path", nil, "a directory outside the config tree that local references may read, or a remote reference (https://HOST/PATH, git::URL, user@host:path) that kustomize may fetch together with what it begins (repeatable); the tree is the directory given, or its git repository")
}
