package cli

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
)

// loadSet loads and indexes configs; located problems come back as an ErrorList.
func loadSet(args []string, opts config.LoadOptions) (*config.Set, error) {
	sources, err := config.LoadWith(args, opts)
	if err != nil {
		return nil, err
	}
	set, errs := config.NewSet(sources)
	if len(errs) > 0 {
		return nil, errs.Err()
	}
	return set, nil
}

type validateResult struct {
	Valid  bool             `json:"valid"`
	Counts map[string]int   `json:"counts,omitempty"`
	Errors config.ErrorList `json:"errors"`
}

func newValidateCmd() *cobra.Command {
	var (
		output           string
		allowPaths       []string
		params, rcParams []string
	)
	cmd := &cobra.Command{
		Use:         "validate PATH...",
		Annotations: map[string]string{localAnnotation: "true"},
		Short:       "Check configs and report every problem with its file and line",
		Long: `Validate reads drover configs (*.pvn.yaml) and reports every problem it finds,
each as FILE:LINE:COL: field: message. It checks syntax, unknown fields, types,
required fields, names and references between configs, label queries, and then
compiles every service for every release channel to find template and
rendering errors (Helm charts and kustomize trees included).

Parameters render with the values given by --param NAME=VALUE (each goes to
every service with a parameter of that name; --param-by-release-channel
RC=NAME=VALUE for one channel), else with their defaults. A required
parameter with neither is rendered with a stand-in of its type ("placeholder"
for a string or an image tag), and any error of that channel names the
stand-in and the --param that would replace it: a chart that checks the value
(a semver constraint on an image tag, say) refuses the stand-in, not your
config.

PATH is a file, a directory (its *.pvn.yaml files, one level), or DIR/...
(recursive). Exits 0 when everything is valid, 1 otherwise.

Local references (kubernetesConfig.local, charts, values files, and what
kustomize reads for them) may only read inside the config tree: the
directory given, or its git repository. --allow-path DIR allows another
directory; remote references kustomize would fetch or clone (http(s) URLs,
git bases) are refused unless --allow-path URL allows them (the URL or a
prefix of it, e.g. --allow-path https://github.com/org/).`,
		Example: `  drover validate examples/quickstart/...
  drover validate app.pvn.yaml services/web.pvn.yaml -o json
  drover validate deploy/... --param image=1.27.3`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			given, err := parseParams(params, rcParams)
			if err != nil {
				return err
			}
			res := validateResult{Errors: config.ErrorList{}}
			// Keep going past files that fail to load, so one run lists every problem.
			sources, loadErrs, err := config.LoadPartialWith(args, config.LoadOptions{AllowPaths: allowPaths})
			if err != nil {
				return err
			}
			res.Errors = append(res.Errors, loadErrs...)
			set, errs := config.NewSet(sources)
			res.Errors = append(res.Errors, errs...)
			if len(errs) == 0 {
				if unused := compiler.UnusedParams(set, given); len(unused) > 0 {
					return usageErrorf("--param: no service among the configs has a parameter %s", strings.Join(quoteAll(unused), ", "))
				}
				opts := compiler.ValidateOptions{Params: given}
				res.Errors = append(res.Errors, withoutEchoes(compiler.ValidateSetWith(cmd.Context(), set, opts), loadErrs)...)
			}
			res.Counts = countKinds(set)
			if err := res.Errors.Err(); err != nil {
				res.Errors, _ = config.AsErrorList(err)
			}
			res.Valid = len(res.Errors) == 0
			if output == "json" {
				if err := writeJSON(cmd.OutOrStdout(), res); err != nil {
					return err
				}
				if !res.Valid {
					return &ExitError{Code: 1}
				}
				return nil
			}
			if !res.Valid {
				for _, e := range res.Errors {
					fmt.Fprintln(cmd.ErrOrStderr(), e.Error())
				}
				return &ExitError{Code: 1, Err: fmt.Errorf("%d %s", len(res.Errors), plural(len(res.Errors), "error"))}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "valid: %s\n", describeCounts(res.Counts))
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	addAllowPathFlag(cmd.Flags(), &allowPaths)
	cmd.Flags().StringArrayVar(&params, "param", nil, "render with parameter value NAME=VALUE (repeatable)")
	cmd.Flags().StringArrayVar(&rcParams, "param-by-release-channel", nil, "render with parameter value RC=NAME=VALUE in one release channel (repeatable)")
	return cmd
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", config.Clip(n))
	}
	return out
}

// withoutEchoes drops problems that only repeat a load error: a field that
// failed to decode was left unset, so "required" or "unknown" errors about
// it (or anything under it) say nothing new.
func withoutEchoes(errs, loadErrs config.ErrorList) config.ErrorList {
	var out config.ErrorList
	for _, e := range errs {
		echo := false
		for _, le := range loadErrs {
			if le.File == e.File && le.Field != "" && (e.Field == le.Field || strings.HasPrefix(e.Field, le.Field+".") || strings.HasPrefix(e.Field, le.Field+"[") || strings.HasPrefix(le.Field, e.Field+".")) {
				echo = true
				break
			}
		}
		if !echo {
			out = append(out, e)
		}
	}
	return out
}

func countKinds(set *config.Set) map[string]int {
	counts := map[string]int{}
	for _, src := range set.Sources {
		counts[src.Kind()]++
	}
	return counts
}

func describeCounts(counts map[string]int) string {
	kinds := make([]string, 0, len(counts))
	total := 0
	for k, n := range counts {
		kinds = append(kinds, k)
		total += n
	}
	sort.Strings(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%d %s", counts[k], plural(counts[k], k))
	}
	return fmt.Sprintf("%d %s (%s)", total, plural(total, "config"), strings.Join(parts, ", "))
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
