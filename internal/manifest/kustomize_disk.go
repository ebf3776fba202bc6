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
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", dir, err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", dir, err)
	}
	return out, nil
}
