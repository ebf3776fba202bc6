package compiler

import "encoding/json"

// redacted replaces secret values in output.
const redacted = "(redacted)"

// Redacted returns the result as a JSON-compatible tree in which every raw
// secret (env values, secret parameter values) is replaced, so it can be
// printed or returned by an API. Secret parameters already print as references.
func (r *Result) Redacted() (any, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return nil, err
	}
	redactTree(tree)
	return tree, nil
}

func redactTree(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "rawSecret" {
				if s, ok := e.(string); ok && s != "" {
					x[k] = redacted
				}
				continue
			}
			redactTree(e)
		}
	case []any:
		for _, e := range x {
			redactTree(e)
		}
	}
}
