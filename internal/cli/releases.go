package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/drover-dev/drover/api/client"
	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/compiler"
)

// drover release: push several services of an application as one release,
// list releases, and show one.

func newReleaseCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "release",
		Short: "Push several services of an application as one release, and follow it",
		Long: `A release is one push of several services of an application: each service
gets its desired state, and the release moves channel by channel. A service
that depends on another (service.dependsOn) waits until that one runs the
release's version in the channel, and a sharedManualApproval given on any
service of the release counts for all of them. See docs/ordering.md.`,
	}
	cmd.AddCommand(newReleaseCreateCmd(g), newReleaseListCmd(g), newReleaseGetCmd(g))
	return cmd
}

func newReleaseCreateCmd(g *globals) *cobra.Command {
	var (
		app, file, output string
		params, services  []string
		dryRun, wait      bool
		immediate         bool
		timeout           time.Duration
	)
	cmd := &cobra.Command{
		Use:   "create --app APP --param SERVICE.NAME=VALUE... [--service SERVICE]... [-f FILE]",
		Short: "Push several services of an application as one release",
		Long: `Create compiles every service named (by --service, by the SERVICE. prefix of a
--param, or in the file given with -f) with its parameters and pushes each of
them as one release; nothing is pushed when one does not compile. It prints
the release's id and the order it takes (--dry-run prints only that, and the
versions, pushing nothing).

The file lists the services and their parameters:

  services:
    - service: db
      params: {image: "1.4"}
    - service: api
      params: {image: "2.0"}

With --wait it follows the release until it succeeded (exit 0), failed (2), a
service waits for a manual approval (4, printing the drover approve --release
command), or --timeout passed (3).`,
		Example: `  drover release create --app shop --param db.image=1.4 --param api.image=2.0 --param web.image=2.0
  drover release create --app shop -f release.yaml --dry-run
  drover release create --app shop --param api.image=2.1 --service web --wait`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if app == "" {
				return usageError(errors.New("--app is required"))
			}
			req, err := releaseRequest(file, params, services)
			if err != nil {
				return err
			}
			req.DryRun, req.User, req.Immediate = dryRun, g.user, immediate
			c := g.client()
			rel, err := c.CreateRelease(cmd.Context(), app, req)
			if err != nil {
				return apiErr(err)
			}
			w := cmd.OutOrStdout()
			if output == "json" && !wait {
				return writeJSON(w, rel)
			}
			if output != "json" {
				if dryRun {
					fmt.Fprintf(w, "release of %s (dry run: nothing pushed)\n", clean(app))
				} else {
					fmt.Fprintf(w, "release %s of %s created\n", clean(rel.ID), clean(app))
				}
				for _, s := range rel.Services {
					fmt.Fprintf(w, "  %s %s\n", clean(s.Service), clean(versionLabel(s.Version, s.DisplayName)))
				}
				printOrder(w, rel.Order)
			}
			if !wait || dryRun {
				return nil
			}
			final, err := waitRelease(cmd.Context(), c, w, output, app, rel.ID, timeout)
			if output == "json" {
				return errors.Join(writeJSON(w, final), err)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&app, "app", "", "application of the services (required)")
	f.StringArrayVar(&params, "param", nil, "parameter value SERVICE.NAME=VALUE (repeatable)")
	f.StringArrayVar(&services, "service", nil, "a service to release without parameters of its own (repeatable)")
	f.StringVarP(&file, "file", "f", "", "a file listing the services and their parameters (YAML or JSON)")
	f.BoolVar(&dryRun, "dry-run", false, "compile and print the versions and the order the release would take; push nothing")
	f.BoolVar(&wait, "wait", false, "follow the release until it succeeded, failed or waits for an approval")
	f.BoolVar(&immediate, "immediate", false, "replace the services' rollouts in flight at once, also where pushes queue (maestro.strategy RELEASE_TRAIN)")
	f.DurationVar(&timeout, "timeout", 30*time.Minute, "with --wait: give up after this long (exit 3)")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}

// releaseFile is what drover release create -f reads.
type releaseFile struct {
	Services []struct {
		Service string            `json:"service"`
		Params  map[string]string `json:"params"`
	} `json:"services"`
}

// releaseRequest gathers the services and parameters of a release from the
// file and the flags, in that order.
func releaseRequest(file string, params, services []string) (apiv1.ReleaseRequest, error) {
	var req apiv1.ReleaseRequest
	index := map[string]int{}
	add := func(svc string) int {
		if i, ok := index[svc]; ok {
			return i
		}
		index[svc] = len(req.Services)
		req.Services = append(req.Services, apiv1.ReleaseServiceRequest{Service: svc})
		return index[svc]
	}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return req, usageError(err)
		}
		var rf releaseFile
		if err := yaml.UnmarshalStrict(data, &rf); err != nil {
			return req, usageErrorf("%s: %v", file, err)
		}
		for i, s := range rf.Services {
			if s.Service == "" {
				return req, usageErrorf("%s: services[%d]: service is required", file, i)
			}
			at := add(s.Service)
			names := make([]string, 0, len(s.Params))
			for n := range s.Params {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, n := range names {
				req.Services[at].Params = append(req.Services[at].Params, apiv1.Param{Name: n, Value: s.Params[n]})
			}
		}
	}
	for _, p := range params {
		key, value, ok := strings.Cut(p, "=")
		svc, name, dotted := strings.Cut(key, ".")
		if !ok || !dotted || svc == "" || name == "" {
			return req, usageErrorf("--param %q: give SERVICE.NAME=VALUE", p)
		}
		pv, err := compiler.ParseParam(name + "=" + value)
		if err != nil {
			return req, usageError(err)
		}
		at := add(svc)
		if slices.ContainsFunc(req.Services[at].Params, func(x apiv1.Param) bool { return x.Name == pv.Name }) {
			return req, usageErrorf("--param %q: parameter %s of %s is given more than once", p, pv.Name, svc)
		}
		req.Services[at].Params = append(req.Services[at].Params, apiv1.Param{Name: pv.Name, Value: pv.Value})
	}
	for _, s := range services {
		add(s)
	}
	if len(req.Services) == 0 {
		return req, usageError(errors.New("name the services to release: --param SERVICE.NAME=VALUE, --service SERVICE or -f FILE"))
	}
	return req, nil
}

// printOrder prints the order a release takes, one step a line.
func printOrder(w io.Writer, order []apiv1.ReleaseStep) {
	if len(order) == 0 {
		return
	}
	fmt.Fprintln(w, "order:")
	for i, st := range order {
		names := make([]string, len(st.Services))
		for j, s := range st.Services {
			names[j] = clean(s)
		}
		fmt.Fprintf(w, "  %d. %s: %s\n", i+1, clean(st.ReleaseChannel), strings.Join(names, ", "))
	}
}

// waitRelease follows a release until it ends, waits for an approval, or
// timeout passes.
func waitRelease(ctx context.Context, c *client.Client, w io.Writer, output, app, id string, timeout time.Duration) (*apiv1.Release, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		rel, err := c.GetRelease(ctx, app, id)
		if err != nil {
			if ctx.Err() != nil {
				return nil, &ExitError{Code: exitTimeout, Err: fmt.Errorf("release %s: still not done after %v", id, timeout)}
			}
			return nil, apiErr(err)
		}
		line := releaseLine(rel)
		if output != "json" && line != last {
			fmt.Fprintln(w, line)
			last = line
		}
		switch rel.Status {
		case "SUCCEEDED", "SKIPPED":
			return rel, nil
		case "FAILED":
			return rel, &ExitError{Code: exitFailed, Err: fmt.Errorf("release %s failed: drover release get %s --app %s says where", id, id, app)}
		}
		if rc := waitingForApproval(rel); rc != "" {
			return rel, &ExitError{Code: exitApproval, Err: fmt.Errorf("release %s waits for approval in %s: drover approve --release %s --app %s --release-channel %s", id, rc, id, app, rc)}
		}
		select {
		case <-ctx.Done():
			return rel, &ExitError{Code: exitTimeout, Err: fmt.Errorf("release %s: still %s after %v", id, rel.Status, timeout)}
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// waitingForApproval is the first release channel where a service of rel
// waits for nothing but a manual approval ("" when none does).
func waitingForApproval(rel *apiv1.Release) string {
	for _, s := range rel.Services {
		for _, ch := range s.ReleaseChannels {
			if ch.Status == "WAITING_MANUAL_APPROVAL" {
				return ch.Name
			}
		}
	}
	return ""
}

// releaseLine is a release's status and its channels' on one line.
func releaseLine(rel *apiv1.Release) string {
	parts := make([]string, len(rel.ReleaseChannels))
	for i, ch := range rel.ReleaseChannels {
		parts[i] = clean(ch.Name) + " " + clean(ch.Status)
	}
	return fmt.Sprintf("release %s: %s (%s)", clean(rel.ID), clean(rel.Status), strings.Join(parts, ", "))
}

func newReleaseListCmd(g *globals) *cobra.Command {
	var app, output string
	cmd := &cobra.Command{
		Use:   "list --app APP",
		Short: "An application's releases, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if app == "" {
				return usageError(errors.New("--app is required"))
			}
			list, err := g.client().ListReleases(cmd.Context(), app)
			if err != nil {
				return apiErr(err)
			}
			w := cmd.OutOrStdout()
			if output == "json" {
				return writeJSON(w, list)
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RELEASE\tSTATUS\tCHANNELS\tSERVICES\tCREATED")
			for _, r := range list.Releases {
				chans := make([]string, len(r.ReleaseChannels))
				for i, ch := range r.ReleaseChannels {
					chans[i] = ch.Name + " " + ch.Status
				}
				svcs := make([]string, len(r.Services))
				for i, s := range r.Services {
					svcs[i] = s.Service
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s by %s\n", clean(r.ID), clean(r.Status), clean(strings.Join(chans, ", ")), clean(strings.Join(svcs, ", ")),
					r.CreatedAt.Local().Format(time.DateTime), clean(r.CreatedBy))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "application (required)")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}

func newReleaseGetCmd(g *globals) *cobra.Command {
	var app, output string
	cmd := &cobra.Command{
		Use:   "get RELEASE --app APP",
		Short: "A release: its status in each release channel, each service's, and why a service waits",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if app == "" {
				return usageError(errors.New("--app is required"))
			}
			rel, err := g.client().GetRelease(cmd.Context(), app, args[0])
			if err != nil {
				return apiErr(err)
			}
			w := cmd.OutOrStdout()
			if output == "json" {
				return writeJSON(w, rel)
			}
			printRelease(w, rel)
			return nil
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "application (required)")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}

// printRelease prints a release: its line, a table of services by channel,
// then what each waiting channel waits for.
func printRelease(w io.Writer, rel *apiv1.Release) {
	fmt.Fprintln(w, releaseLine(rel))
	fmt.Fprintf(w, "created by %s at %s\n", clean(rel.CreatedBy), rel.CreatedAt.Local().Format(time.DateTime))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "SERVICE\tVERSION\tSTATUS"
	for _, ch := range rel.ReleaseChannels {
		head += "\t" + clean(strings.ToUpper(ch.Name))
	}
	fmt.Fprintln(tw, head)
	var waits []string
	for _, s := range rel.Services {
		row := clean(s.Service) + "\t" + clean(versionLabel(s.Version, s.DisplayName)) + "\t" + clean(s.Status)
		for _, ch := range rel.ReleaseChannels {
			st := "-"
			for _, c := range s.ReleaseChannels {
				if c.Name != ch.Name {
					continue
				}
				st = c.Status
				if strings.HasPrefix(c.Status, "WAITING") && c.Message != "" {
					waits = append(waits, fmt.Sprintf("%s in %s: %s", clean(s.Service), clean(c.Name), clean(c.Message)))
				}
			}
			row += "\t" + clean(st)
		}
		fmt.Fprintln(tw, row)
	}
	_ = tw.Flush()
	for _, line := range waits {
		fmt.Fprintln(w, line)
	}
}
