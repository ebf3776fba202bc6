package manifest

import (
	"bytes"
	"fmt"

	"sigs.k8s.io/yaml"
)

// Encode returns a canonical, deterministic YAML stream of the objects, for
// display: keys sorted, two-space indentation, documents separated by
// "---". It is the same rendering as `kubectl get -o yaml` (objects go
// through JSON, then sigs.k8s.io/yaml), so strings that YAML 1.1 would read
// as something else ("yes", "1.10", "2024-01-02") are quoted and
// Decode(Encode(objs)) gives objs back. No objects encode to an empty stream.
func Encode(objs []Object) ([]byte, error) {
	var buf bytes.Buffer
	for i, obj := range objs {
		out, err := yaml.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("encoding object %d (%s): %w", i, ObjectName(obj), err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(out)
	}
	return buf.Bytes(), nil
}
