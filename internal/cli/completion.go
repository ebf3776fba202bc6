package cli

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// completionTimeout bounds what one TAB may ask of the server: a shell
// waits for the answer, so a server that does not answer completes nothing
// rather than hanging the prompt.
const completionTimeout = 2 * time.Second

// addCompletions teaches the completion scripts (drover completion SHELL)
// what cobra cannot know by itself: -o's formats (from the flag's help),
// and, asked of the server with the usual credentials, the services of a
// SERVICE argument, the applications of --app and the release channels of
// --release-channel. Subcommands and flags complete without it. A server
// that cannot be reached completes nothing, silently.
func addCompletions(root *cobra.Command, g *globals) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if f := c.Flags().Lookup("output"); f != nil {
			if formats := outputFormats(f.Usage); len(formats) > 0 {
				_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
			}
		}
		if takesService(c) && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return completeServices(cmd, g, toComplete), cobra.ShellCompDirectiveNoFileComp
			}
		}
		if c.Flags().Lookup("app") != nil {
			_ = c.RegisterFlagCompletionFunc("app", func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				return completeApps(cmd, g, toComplete), cobra.ShellCompDirectiveNoFileComp
			})
		}
		if c.Flags().Lookup("release-channel") != nil {
			_ = c.RegisterFlagCompletionFunc("release-channel", func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				return completeChannels(cmd, g, args, toComplete), cobra.ShellCompDirectiveNoFileComp
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// takesService reports whether c's first argument is a service (its use
// line reads "VERB SERVICE ..." or "VERB [SERVICE ...]").
func takesService(c *cobra.Command) bool {
	fields := strings.Fields(c.Use)
	return len(fields) > 1 && strings.TrimRight(strings.TrimPrefix(fields[1], "["), "]") == "SERVICE"
}

// outputFormats are the formats an -o flag's help names ("output format:
// text, yaml or json"), none for an -o that is not a format.
func outputFormats(usage string) []string {
	rest, ok := strings.CutPrefix(usage, "output format: ")
	if !ok {
		return nil
	}
	var out []string
	for _, w := range strings.FieldsFunc(rest, func(r rune) bool { return r == ' ' || r == ',' || r == '(' }) {
		if w == "text" || w == "json" || w == "yaml" {
			out = append(out, w)
		}
	}
	return out
}

// completionContext is the context of one completion request.
func completionContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	return context.WithTimeout(parent, completionTimeout)
}

// flagValue is the value of cmd's flag name, "" when it has none.
func flagValue(cmd *cobra.Command, name string) string {
	if f := cmd.Flags().Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// completeServices are the services applied to the server (of --app, when
// given) whose names start with prefix, each described by its application.
func completeServices(cmd *cobra.Command, g *globals, prefix string) []string {
	ctx, cancel := completionContext(cmd)
	defer cancel()
	list, err := g.client().ListConfigs(ctx, "service")
	if err != nil {
		return nil
	}
	app := flagValue(cmd, "app")
	var out []string
	for _, c := range list.Configs {
		a, svc, ok := strings.Cut(c.Name, "/")
		if !ok || (app != "" && a != app) || !strings.HasPrefix(svc, prefix) {
			continue
		}
		out = append(out, svc+"\t"+"service of "+a)
	}
	sort.Strings(out)
	return out
}

// completeApps are the applications applied to the server whose names
// start with prefix.
func completeApps(cmd *cobra.Command, g *globals, prefix string) []string {
	ctx, cancel := completionContext(cmd)
	defer cancel()
	list, err := g.client().ListConfigs(ctx, "application")
	if err != nil {
		return nil
	}
	var out []string
	for _, c := range list.Configs {
		if strings.HasPrefix(c.Name, prefix) {
			out = append(out, c.Name)
		}
	}
	sort.Strings(out)
	return out
}

// completeChannels are the release channels of the service in args (of
// --app) whose names start with prefix; none without both.
func completeChannels(cmd *cobra.Command, g *globals, args []string, prefix string) []string {
	app := flagValue(cmd, "app")
	if len(args) == 0 || app == "" {
		return nil
	}
	ctx, cancel := completionContext(cmd)
	defer cancel()
	st, err := g.client().Status(ctx, app, args[0])
	if err != nil {
		return nil
	}
	var out []string
	for _, rc := range st.ReleaseChannels {
		if strings.HasPrefix(rc.Name, prefix) {
			out = append(out, rc.Name+"\t"+strings.ToLower(rc.Status))
		}
	}
	return out
}
