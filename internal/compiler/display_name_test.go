package compiler_test

import (
	"testing"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
	ds "github.com/drover-dev/drover/internal/desiredstate"
)

// TestDisplayName: a version is named by the service's bundleName, else
// by its dockerImage parameters' tags (one: the tag; several: name=tag in
// declaration order; differing by channel: each tag once; a digest cut
// short), else not at all; the engine's form carries the name.
func TestDisplayName(t *testing.T) {
	t.Parallel()
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name   string
		extra  string // more service fields
		params string // the service's parameters
		given  []compiler.ParamValue
		want   string
	}{
		{name: "bundle-name", extra: "  bundleName: 'release-{{.Params.image.Tag}}'\n",
			params: "    - {name: image, dockerImage: {imageRegistryInfo: {imageRepository: x/web}}}\n",
			given:  []compiler.ParamValue{{Name: "image", Value: "1.28"}}, want: "release-1.28"},
		{name: "one-image", params: "    - {name: image, dockerImage: {imageRegistryInfo: {imageRepository: x/web}}}\n    - {name: n, int: {}}\n",
			given: []compiler.ParamValue{{Name: "image", Value: "1.28"}, {Name: "n", Value: "3"}}, want: "1.28"},
		{name: "several-images", params: "    - {name: web, dockerImage: {imageRegistryInfo: {imageRepository: x/web}}}\n    - {name: sidecar, dockerImage: {imageRegistryInfo: {imageRepository: x/side}}}\n",
			given: []compiler.ParamValue{{Name: "sidecar", Value: "2.0"}, {Name: "web", Value: "1.28"}}, want: "web=1.28, sidecar=2.0"},
		{name: "per-channel", params: "    - {name: image, dockerImage: {imageRegistryInfo: {imageRepository: x/web}}}\n",
			given: []compiler.ParamValue{{Name: "image", Value: "1.28"}, {Name: "image", Value: "1.27", ReleaseChannel: "prod"}}, want: "1.28|1.27"},
		{name: "digest", params: "    - {name: image, dockerImage: {imageRegistryInfo: {imageRepository: x/web}}}\n",
			given: []compiler.ParamValue{{Name: "image", Value: "x/web@" + digest}}, want: "sha256:0123456789ab"},
		{name: "none", params: "    - {name: n, string: {}}\n",
			given: []compiler.ParamValue{{Name: "n", Value: "1.28"}}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			set := writeTree(t, map[string]string{
				"runtime.pvn.yaml": limitsRuntime,
				"app.pvn.yaml":     limitsApp,
				"svc/s.pvn.yaml": "service:\n  name: s\n  application: a\n" +
					"  kubernetesConfig: {type: KUBERNETES, inlined: \"kind: ConfigMap\\napiVersion: v1\\nmetadata: {name: x}\\n\"}\n" +
					tc.extra + "  parameters:\n" + tc.params,
			})
			in, err := compiler.InputFor(set, config.ServiceKey{Application: "a", Service: "s"})
			if err != nil {
				t.Fatal(err)
			}
			in.Params = tc.given
			res, err := compiler.Compile(in)
			if err != nil {
				t.Fatal(err)
			}
			if res.DisplayName != tc.want {
				t.Errorf("display name %q, want %q", res.DisplayName, tc.want)
			}
			form, err := res.Engine()
			if err != nil {
				t.Fatal(err)
			}
			raw, err := ds.Encode(form)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ds.Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			if back.DisplayName != tc.want {
				t.Errorf("stored display name %q, want %q", back.DisplayName, tc.want)
			}
		})
	}
}
