package cli

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
)

func newCompileCmd() *cobra.Command {
	var (
		app, service, output string
		params, rcParams     []string
		releaseChannels      []string
		allowPaths           []string
	)
	cmd := &cobra.Command{
		Use:         "compile PATH... --app APP --service SERVICE",
		Annotations: map[string]string{localAnnotation: "true"},
		Short:       "Print a service's compiled config for every release channel",
		Long: `Compile renders one service the way a push would, without a server: for each
release channel of its application (release channel groups expanded from
runtime labels), the selected runtime, the preconditions, and the rendered
objects (Kubernetes manifests with templates and patches applied, or a custom
runtime's commands with their parameter values), plus the bundle version and
the desired state. Secrets are redacted.

--app and --service may be omitted when the configs hold only one. Local
references are read as validate reads them (--allow-path DIR or URL).`,
		Example: `  drover compile examples/quickstart/... --app quickstart --service web --param image=1.27
  drover compile configs/... --app shop --service api --param-by-release-channel staging=image=1.28 -o json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "yaml", "json"); err != nil {
				return err
			}
			pvs, err := parseParams(params, rcParams)
			if err != nil {
				return err
			}
			set, err := loadSet(args, config.LoadOptions{AllowPaths: allowPaths})
			if err != nil {
				return located(err)
			}
			if errs := set.Validate(); len(errs) > 0 {
				return located(errs.Err())
			}
			key, err := pickService(set, app, service)
			if err != nil {
				return usageError(err)
			}
			in, err := compiler.InputFor(set, key)
			if err != nil {
				return usageError(err)
			}
			in.Params = append(in.Params, pvs...)
			in.ReleaseChannels = releaseChannels
			res, err := compiler.Compile(in)
			if err != nil {
				var cerrs compiler.Errors
				if errors.As(err, &cerrs) {
					return located(compiler.Locate(set, cerrs).Err())
				}
				return err
			}
			out, err := res.Redacted()
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			return writeYAML(cmd.OutOrStdout(), out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&app, "app", "", "application of the service")
	f.StringVar(&service, "service", "", "service to compile")
	f.StringArrayVar(&params, "param", nil, "parameter value NAME=VALUE (repeatable)")
	f.StringArrayVar(&rcParams, "param-by-release-channel", nil, "parameter value for one release channel RC=NAME=VALUE (repeatable)")
	f.StringSliceVar(&releaseChannels, "release-channel", nil, "only print these release channels (the bundle version still covers all)")
	f.StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	addAllowPathFlag(f, &allowPaths)
	return cmd
}

// located prints located config errors one per line and exits 1.
func located(err error) error {
	if l, ok := config.AsErrorList(err); ok {
		return &ExitError{Code: 1, Err: errors.New(l.Error())}
	}
	return err
}

// pickService resolves --app/--service, defaulting each when only one exists.
func pickService(set *config.Set, app, service string) (config.ServiceKey, error) {
	keys := set.ServiceKeys()
	var matches []config.ServiceKey
	for _, k := range keys {
		if (app == "" || k.Application == app) && (service == "" || k.Service == service) {
			matches = append(matches, k)
		}
	}
	switch {
	case len(matches) == 1:
		return matches[0], nil
	case len(matches) == 0 && app != "" && set.Applications[app] == nil:
		return config.ServiceKey{}, fmt.Errorf("no application %q in the given configs (applications: %s)", app, strings.Join(sortedNames(set.Applications), ", "))
	case len(matches) == 0:
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = k.String()
		}
		return config.ServiceKey{}, fmt.Errorf("no service %q in the given configs (services: %s)", service, strings.Join(names, ", "))
	}
	names := make([]string, len(matches))
	for i, k := range matches {
		names[i] = k.String()
	}
	return config.ServiceKey{}, fmt.Errorf("several services match (%s): set --app and --service", strings.Join(names, ", "))
}

func sortedNames(m map[string]*config.Source) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
