package manifest

import (
	"fmt"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// RenderKustomizeDir renders a kustomize directory on disk, as `kubectl
// kustomize DIR` would; overlays may reference bases elsewhere on disk. It is
// used when configs are loaded, before they are sent anywhere.
func RenderKustomizeDir(dir string) ([]byte, error) {
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionUnspecified // same order as RenderKustomize
	kustomizeMu.Lock()                             // kustomize's OpenAPI schema is process-global
	defer kustomizeMu.Unlock()
	resMap, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", dir, err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", dir, err)
	}
	return out, nil
}
