package cli

import (
	"encoding/json"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// outputFormat validates an -o value against the allowed formats.
func outputFormat(value string, allowed ...string) error {
	if slices.Contains(allowed, value) {
		return nil
	}
	if value == "yaml" && slices.Contains(allowed, "json") {
		return usageErrorf("-o yaml: this command prints %s; yaml is for drover compile and drover compiled (-o json gives the same fields)", formatList(allowed))
	}
	return usageErrorf("invalid output format %q: use %s", value, formatList(allowed))
}

// formatList is "text or json", "text, yaml or json".
func formatList(formats []string) string {
	if len(formats) < 2 {
		return strings.Join(formats, "")
	}
	return strings.Join(formats[:len(formats)-1], ", ") + " or " + formats[len(formats)-1]
}

// addOutputFlag adds -o (--output) with formats, the first the default.
func addOutputFlag(cmd *cobra.Command, output *string, formats ...string) {
	cmd.Flags().StringVarP(output, "output", "o", formats[0], "output format: "+formatList(formats))
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeYAML prints v as YAML through its JSON form, so field names match -o json.
func writeYAML(w io.Writer, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	out, err := yaml.JSONToYAML(raw)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}
