package terraform

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-exec/tfexec"
)

// splitWords splits s into words as a POSIX shell would, without any
// expansion: blanks separate words, single quotes keep everything literal,
// double quotes keep everything but \" \\ \$ \` and a backslash-newline, and a
// backslash outside quotes escapes the next character.
func splitWords(s string) ([]string, error) {
	var (
		words   []string
		cur     strings.Builder
		inWord  bool
		escaped bool
		quote   rune // 0, '\'' or '"'
	)
	for _, c := range s {
		switch {
		case escaped:
			escaped = false
			if quote == '"' && !strings.ContainsRune("\"\\$`\n", c) {
				cur.WriteRune('\\')
			}
			if c != '\n' {
				cur.WriteRune(c)
			}
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteRune(c)
			}
		case quote == '"':
			switch c {
			case '"':
				quote = 0
			case '\\':
				escaped = true
			default:
				cur.WriteRune(c)
			}
		case c == '\\':
			escaped, inWord = true, true
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if escaped {
		return nil, errors.New("trailing backslash")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// quoteWord quotes w for a shell-like splitter (terraform's TF_CLI_ARGS_*).
func quoteWord(w string) string {
	if w != "" && !strings.ContainsAny(w, " \t\n\r'\"\\$`") {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// initArgs are the terraform init flags of the extraInitArgs parameter.
type initArgs struct {
	// opts are the flags tfexec has options for. They must go through
	// tfexec: it always passes -backend, -get and -upgrade itself, and a
	// later flag wins over one given in TF_CLI_ARGS_init.
	opts []tfexec.InitOption
	// extra are the other flags, passed in TF_CLI_ARGS_init ("" if none).
	extra string
	// words is the split parameter, for the record of the command.
	words []string
}

// parseInitArgs splits extraInitArgs like a shell would and sorts its flags
// into tfexec options and TF_CLI_ARGS_init.
func parseInitArgs(s string) (initArgs, error) {
	words, err := splitWords(s)
	if err != nil {
		return initArgs{}, fmt.Errorf("parameter extraInitArgs: %w", err)
	}
	a := initArgs{words: words}
	var extra []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") {
			// The value of an unknown flag ("-lockfile readonly"), or an
			// argument: terraform judges.
			extra = append(extra, quoteWord(w))
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(w, "-"), "=")
		name = strings.TrimPrefix(name, "-") // --flag is -flag to terraform
		// takesValue reads the flag's value from "=v" or the next word.
		takesValue := func() (string, error) {
			if hasValue {
				return value, nil
			}
			if i+1 >= len(words) {
				return "", fmt.Errorf("parameter extraInitArgs: flag -%s needs a value", name)
			}
			i++
			return words[i], nil
		}
		boolValue := func() (bool, error) {
			if !hasValue {
				return true, nil
			}
			b, err := strconv.ParseBool(value)
			if err != nil {
				return false, fmt.Errorf("parameter extraInitArgs: flag -%s: %q is not a boolean", name, value)
			}
			return b, nil
		}
		switch name {
		case "upgrade", "reconfigure", "force-copy", "backend", "get":
			b, err := boolValue()
			if err != nil {
				return initArgs{}, err
			}
			switch name {
			case "upgrade":
				a.opts = append(a.opts, tfexec.Upgrade(b))
			case "reconfigure":
				a.opts = append(a.opts, tfexec.Reconfigure(b))
			case "force-copy":
				a.opts = append(a.opts, tfexec.ForceCopy(b))
			case "backend":
				a.opts = append(a.opts, tfexec.Backend(b))
			default:
				a.opts = append(a.opts, tfexec.Get(b))
			}
		case "backend-config", "plugin-dir":
			v, err := takesValue()
			if err != nil {
				return initArgs{}, err
			}
			if name == "backend-config" {
				a.opts = append(a.opts, tfexec.BackendConfig(v))
			} else {
				a.opts = append(a.opts, tfexec.PluginDir(v))
			}
		case "input", "no-color", "json":
			// Set by drover (or unusable: -json would change the output).
			return initArgs{}, fmt.Errorf("parameter extraInitArgs: flag %s is managed by drover", w)
		default:
			extra = append(extra, quoteWord(w))
		}
	}
	a.extra = strings.Join(extra, " ")
	return a, nil
}
