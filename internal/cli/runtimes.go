package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/atomicfile"
	"github.com/drover-dev/drover/internal/usertext"
)

func newRuntimesCmd(g *globals) *cobra.Command {
	cmd := newRuntimesListCmd(g, "runtimes")
	cmd.Short = "List runtimes; link, unlink and rotate the tokens of runtimes served by agents"
	cmd.AddCommand(newRuntimesListCmd(g, "list"), newRuntimesLinkCmd(g), newRuntimesUnlinkCmd(g), newRuntimesRotateCmd(g))
	return cmd
}

func newRuntimesListCmd(g *globals, use string) *cobra.Command {
	var (
		output string
		wide   bool
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: "List the runtimes, their agents and what their clusters reported",
		Long: `Lists the configured and linked runtimes. A linked runtime is served by an
agent (drover runtimes link): AGENT shows whether it is connected, and since
when it is silent if not. For a Kubernetes runtime it shows the cluster's
version and how many API versions it serves, as drover last asked it (at
start, after configs are applied, when an agent connects, and every 10
minutes): pushes render Helm charts against them (.Capabilities), unless the
runtime's config sets kubernetes.kubeVersion. --wide adds the agents' versions,
hosts, the addresses they connected from (as the server answering saw them)
and since when, and labels, and lists the API versions. One agent serves a
linked runtime: a line says so when another agent with the same token tried
to connect in the last 15 minutes, and was refused.`,
		Example: `  drover runtimes
  drover runtimes list --wide
  drover runtimes -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			list, err := g.client().Runtimes(cmd.Context())
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			return printRuntimes(cmd.OutOrStdout(), list, wide, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().BoolVar(&wide, "wide", false, "show agents' versions, hosts and labels, and each runtime's API versions")
	return cmd
}

func newRuntimesLinkCmd(g *globals) *cobra.Command {
	var (
		output, labels, image, namespace, tokenFile string
	)
	cmd := &cobra.Command{
		Use:   "link NAME",
		Short: "Link a runtime served by an agent and print its join token once",
		Long: `Link registers a runtime that an agent serves: a Kubernetes cluster (the agent
runs in it, or beside it with a kubeconfig) or a host that runs custom runtime
and Terraform commands (drover agent --mode commands; name it as the
proxyRuntime of those runtimes). The agent dials out to the server; the server
keeps no credential of the cluster or host, only the hash of the join token.

It prints the token once, the command that runs the agent, and (with
--manifests-only, alone) the Kubernetes manifests that install it in a
cluster. The command reads the token from a file (arguments are visible to
other users): --token-file PATH writes it there, readable by you only, else
link prints how to. Application configs may then name the runtime; a
runtime: config of the same name (with no type) adds labels and settings.`,
		Example: `  drover runtimes link prod-eu --labels env=prod,region=eu
  drover runtimes link prod-eu --token-file /etc/drover/prod-eu.token
  drover runtimes link prod-eu -o json
  drover runtimes link staging --manifests-only | kubectl --context staging apply -f -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			manifestsOnly, _ := cmd.Flags().GetBool("manifests-only")
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			lbls, err := parseLabels(labels)
			if err != nil {
				return err
			}
			if tokenFile, err = checkTokenFile(tokenFile); err != nil {
				return err
			}
			resp, err := g.client().LinkRuntime(cmd.Context(), apiv1.LinkRuntimeRequest{Name: args[0], Labels: lbls, Image: image, Namespace: namespace, TokenFile: tokenFile})
			if err != nil {
				return apiErr(err)
			}
			return printJoin(cmd, resp, output, manifestsOnly, "linked", tokenFile)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&labels, "labels", "", "labels of the runtime, as k=v,k2=v2 (release channels select runtimes by label)")
	cmd.Flags().StringVar(&image, "image", "", "the agent's container image in the manifests (default: drover's image of the server's version)")
	cmd.Flags().StringVar(&namespace, "namespace", "", "the namespace the manifests install the agent in (default drover-agent)")
	cmd.Flags().Bool("manifests-only", false, "print only the Kubernetes manifests (pipe them to kubectl apply -f -)")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "write the join token to this file (mode 0600, replaced if it exists); the printed command reads it from there")
	return cmd
}

func newRuntimesRotateCmd(g *globals) *cobra.Command {
	var output, image, namespace, tokenFile string
	cmd := &cobra.Command{
		Use:   "rotate-token NAME",
		Short: "Give a linked runtime a new join token; the old one stops working",
		Long: `Rotate-token replaces a linked runtime's join token and disconnects its agent:
the old token is refused from now on. It prints the new token once, with the
command and manifests, as link does; --token-file PATH writes it to PATH
(mode 0600), replacing the old one there.`,
		Example: `  drover runtimes rotate-token prod-eu
  drover runtimes rotate-token prod-eu --token-file /etc/drover/prod-eu.token`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			manifestsOnly, _ := cmd.Flags().GetBool("manifests-only")
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			tokenFile, err := checkTokenFile(tokenFile)
			if err != nil {
				return err
			}
			resp, err := g.client().RotateRuntimeToken(cmd.Context(), args[0], apiv1.LinkRuntimeRequest{Image: image, Namespace: namespace, TokenFile: tokenFile})
			if err != nil {
				return apiErr(err)
			}
			return printJoin(cmd, resp, output, manifestsOnly, "has a new join token", tokenFile)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&image, "image", "", "the agent's container image in the manifests")
	cmd.Flags().StringVar(&namespace, "namespace", "", "the namespace the manifests install the agent in (default drover-agent)")
	cmd.Flags().Bool("manifests-only", false, "print only the Kubernetes manifests")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "write the new join token to this file (mode 0600, replaced if it exists)")
	return cmd
}

func newRuntimesUnlinkCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "unlink NAME",
		Short: "Remove a linked runtime: its agent is cut off and its token refused",
		Long: `Unlink removes a linked runtime. Its agent is disconnected within seconds
(at once by the server it is connected to) and its token is refused from then
on. Release channels on the runtime wait, saying it is not linked, until it is
linked again or the configs change. Nothing is deleted from the cluster.`,
		Example: `  drover runtimes unlink prod-eu`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.client().UnlinkRuntime(cmd.Context(), args[0]); err != nil {
				return apiErr(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "runtime %s unlinked: its agent is disconnected and its token refused\n", clean(args[0]))
			return nil
		},
	}
}

// parseLabels reads k=v,k2=v2.
func parseLabels(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, UsageErrorf("invalid --labels %q: want k=v,k2=v2", s)
		}
		out[k] = strings.TrimSpace(v)
	}
	return out, nil
}

// checkTokenFile returns the absolute form of the --token-file path ("" =
// none), once sure a file can be written beside it: the token is shown
// once, so the link must not happen when it cannot be saved.
func checkTokenFile(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("--token-file %s: %w", path, err)
	}
	if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
		return "", UsageErrorf("--token-file %s is a directory: name the file to write the token to", path)
	}
	probe, err := os.CreateTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".probe-*")
	if err != nil {
		return "", fmt.Errorf("--token-file %s: cannot write there (%w); pick a writable directory", path, err)
	}
	_ = probe.Close()
	_ = os.Remove(probe.Name())
	return abs, nil
}

// printJoin prints how to start the agent of a linked runtime; tokenFile
// ("" = none) is where the token is to be written.
func printJoin(cmd *cobra.Command, resp *apiv1.LinkRuntimeResponse, output string, manifestsOnly bool, what, tokenFile string) error {
	w := cmd.OutOrStdout()
	var saveErr error
	if tokenFile != "" {
		if saveErr = atomicfile.Write(tokenFile, []byte(resp.Token+"\n"), 0o600); saveErr != nil {
			// Shown once: print it (the JSON and the manifests hold it
			// too), since it could not be saved.
			saveErr = fmt.Errorf("write the join token to %s: %w; it is printed above, save it yourself (mode 0600)", tokenFile, saveErr)
			tokenFile = ""
		}
	}
	switch {
	case output == "json":
		return errors.Join(writeJSON(w, resp), saveErr)
	case manifestsOnly:
		_, err := io.WriteString(w, resp.Manifests)
		return errors.Join(err, saveErr)
	}
	fmt.Fprintf(w, "runtime %s %s.\n\n", clean(resp.Name), what)
	if tokenFile != "" {
		fmt.Fprintf(w, "Join token written to %s (mode 0600; shown nowhere else, the server keeps only its hash).\n\n", clean(tokenFile))
	} else {
		fmt.Fprintf(w, "Join token (shown once; the server keeps only its hash):\n  %s\n\n", resp.Token)
		fmt.Fprintf(w, "Save it in a file only you can read, where the agent reads it (not on its command line:\nother users see arguments):\n  (umask 077 && printf '%%s\\n' '%s' > %s)\n\n", resp.Token, usertext.ShellQuote(resp.TokenFile))
	}
	if resp.Warning != "" {
		fmt.Fprintf(w, "Warning: %s\n\n", resp.Warning)
	}
	if resp.Fingerprint != "" {
		fmt.Fprintf(w, "The server's agent certificate: sha256:%s\n\n", resp.Fingerprint)
	}
	fmt.Fprintf(w, "Run the agent beside the cluster (it uses the kubeconfig you give it):\n  %s\n\n", resp.Command)
	fmt.Fprintf(w, "Or on a host that runs custom runtime commands:\n  %s\n\n", strings.Replace(resp.Command, "--kubeconfig ~/.kube/config", "--mode commands", 1))
	fmt.Fprintf(w, "Or install it in the cluster with these manifests (save them, then kubectl apply -f FILE;\n--manifests-only prints them alone):\n\n")
	if _, err := io.WriteString(w, resp.Manifests); err != nil {
		return err
	}
	return saveErr
}

func printRuntimes(w io.Writer, list *apiv1.RuntimeList, wide bool, now time.Time) error {
	if len(list.Runtimes) == 0 {
		fmt.Fprintln(w, "no runtimes configured or linked")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "NAME\tKIND\tAGENT\tKUBERNETES\tAPI VERSIONS\tREPORTED"
	if wide {
		head += "\tAGENT VERSION\tMODE\tHOST\tFROM\tCONNECTED\tLABELS"
	}
	fmt.Fprintln(tw, head)
	for _, r := range list.Runtimes {
		version, apis, when := "-", "-", "-"
		if !r.ObservedAt.IsZero() {
			version = orDash(clean(r.KubeVersion))
			apis = fmt.Sprint(len(r.APIVersions))
			when = ago(now, r.ObservedAt)
		}
		agent := agentState(r.Agent, now)
		if r.Agent == nil && r.Via != "" {
			agent = "through " + clean(r.Via)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", clean(r.Name), orDash(clean(r.Kind)), agent, version, apis, when)
		if wide {
			av, mode, host, from, since := "-", "-", "-", "-", "-"
			if a := r.Agent; a != nil {
				av, mode, host, from = orDash(clean(a.Version)), orDash(clean(a.Mode)), orDash(clean(a.Host)), orDash(clean(a.RemoteAddr))
				if a.State == "connected" && !a.ConnectedAt.IsZero() {
					since = a.ConnectedAt.UTC().Format(time.RFC3339)
				}
			}
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\t%s\t%s", av, mode, host, from, since, orDash(clean(formatLabels(r.Labels))))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range list.Runtimes {
		if a := r.Agent; a != nil && a.State != "connected" && a.Error != "" {
			fmt.Fprintf(w, "%s: %s\n", clean(r.Name), clean(a.Error))
		}
		if a := r.Agent; a != nil && a.Refused != nil {
			fmt.Fprintf(w, "%s: %s\n", clean(r.Name), refusedLine(a, now))
		}
	}
	if wide {
		for _, r := range list.Runtimes {
			if len(r.APIVersions) == 0 {
				continue
			}
			fmt.Fprintf(w, "\n%s:\n", clean(r.Name))
			for _, v := range r.APIVersions {
				fmt.Fprintf(w, "  %s\n", clean(v))
			}
		}
	}
	return nil
}

// refusedLine says that another agent tried to serve a runtime.
func refusedLine(a *apiv1.AgentInfo, now time.Time) string {
	f := a.Refused
	what := "another agent tried to connect"
	if f.Count > 1 {
		what = fmt.Sprintf("another agent tried to connect %d times, last", f.Count)
	}
	version := ""
	if f.Version != "" {
		version = ", version " + clean(f.Version)
	}
	holder := "this runtime's agent"
	if a.RemoteAddr != "" {
		holder = "the agent connected from " + clean(a.RemoteAddr)
	}
	return fmt.Sprintf("%s at %s (%s) from %s%s: refused, as %s serves it; stop one of them, or rotate the token",
		what, f.At.UTC().Format(time.RFC3339), ago(now, f.At), clean(f.RemoteAddr), version, holder)
}

// agentState is the AGENT column: "-" for a runtime no agent serves.
func agentState(a *apiv1.AgentInfo, now time.Time) string {
	switch {
	case a == nil:
		return "-"
	case a.State == "connected":
		return "connected (heartbeat " + ago(now, a.HeartbeatAt) + ")"
	case a.State == "disconnected" && !a.HeartbeatAt.IsZero():
		return "disconnected, silent " + now.Sub(a.HeartbeatAt).Round(time.Second).String()
	}
	return a.State
}

func ago(now, t time.Time) string {
	return now.Sub(t).Round(time.Second).String() + " ago"
}

func formatLabels(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + l[k]
	}
	return strings.Join(parts, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
