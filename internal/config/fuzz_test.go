package config

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode checks that Decode never panics, that every error it returns is
// located in the file, and that a decoded file marshals to JSON which
// DecodeInternal reads back to the same JSON (how drover stores configs).
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		validTree["shop.pvn.yaml"],
		validTree["services/web.pvn.yaml"],
		validTree["runtimes/k8s.pvn.yaml"],
		validTree["protections/window.pvn.yaml"],
		validTree["extensions/migrate.pvn.yaml"],
		"service:\n  name: web\n  application: shop\n  kubernetes_config: {type: 2, local: {path: k8s, subPath: overlays/x}}\n  progressDeadline: 5m\n",
		"runtime:\n  name: ext\n  extension:\n    debug: {task_config: {program: {cmd: [info]}}}\n    apply: {timeout: \"1.5s\", maxConcurrency: 0x10}\n",
		"application:\n  name: a\n  releaseChannels:\n    - name: p\n      preconditions:\n        - manualApproval:\n",
		"service:\n  name: a\n  parameters:\n    - name: n\n      int: {defaultValue: \"12\"}\n  env: &e {A: {value: x}}\n  perReleaseChannel: [{releaseChannel: p, env: *e}]\n",
		"application: {name: a}\n---\nservice: {name: b}\n",
		"service:\n  name: a\n  helm: {}\n  bogus: 1\n",
		"releaseChannel:\n  application: a\n  name: b\n",
	} {
		f.Add([]byte(seed))
	}
	// The example configs of the repository, when present.
	_ = filepath.WalkDir(filepath.Join("..", "..", "examples"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && IsConfigFile(p) {
			if data, err := os.ReadFile(p); err == nil {
				f.Add(data)
			}
		}
		return nil
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Decode("f.pvn.yaml", data)
		if err != nil {
			l, ok := AsErrorList(err)
			if !ok || len(l) == 0 {
				t.Fatalf("error without located errors: %v", err)
			}
			for _, e := range l {
				if e.File != "f.pvn.yaml" || e.Msg == "" {
					t.Fatalf("badly located error: %+v", e)
				}
			}
			return
		}
		if d.File == nil {
			t.Fatal("Decode returned no file and no error")
		}
		raw, err := json.Marshal(d.File)
		if err != nil {
			t.Fatalf("json.Marshal: %v", err)
		}
		back, err := DecodeInternal("f.json", raw)
		if err != nil {
			t.Fatalf("DecodeInternal(%s): %v", raw, err)
		}
		again, err := json.Marshal(back.File)
		if err != nil {
			t.Fatalf("json.Marshal again: %v", err)
		}
		if !bytes.Equal(raw, again) {
			t.Fatalf("round trip changed the config:\n%s\n%s", raw, again)
		}
	})
}
