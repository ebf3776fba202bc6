package compiler

import (
	"slices"
	"strings"
)

// A version's display name is what people recognise it by, beside its id
// (the bundle version): the service's bundleName when it sets one, else the
// tags of its dockerImage parameters, else nothing.
//
//   - one dockerImage parameter: its tag, "1.28";
//   - several: name=tag for each, in the order they are declared,
//     "web=1.28, sidecar=2.0";
//   - a parameter whose tag differs between release channels lists each tag
//     once, in channel order, separated by "|": "1.28|1.27";
//   - an image pinned by digest shows "sha256:" and the digest's first 12
//     hex digits.

// digestShown is how many hex digits of a digest a display name keeps.
const digestShown = 12

// displayName names the result's version for people (see above).
func displayName(in *Input, res *Result) string {
	if res.BundleName != "" {
		return res.BundleName
	}
	type image struct {
		name string
		tags []string
	}
	var images []image
	for _, def := range in.Service.Parameters {
		if def.DockerImage == nil {
			continue
		}
		img := image{name: def.Name}
		for _, rc := range res.ReleaseChannels {
			d, ok := rc.Parameters[def.Name].(DockerImage)
			if !ok || d.Tag == "" {
				continue
			}
			if tag := shortTag(d.Tag); !slices.Contains(img.tags, tag) {
				img.tags = append(img.tags, tag)
			}
		}
		if len(img.tags) > 0 {
			images = append(images, img)
		}
	}
	switch len(images) {
	case 0:
		return ""
	case 1:
		return strings.Join(images[0].tags, "|")
	}
	parts := make([]string, len(images))
	for i, img := range images {
		parts[i] = img.name + "=" + strings.Join(img.tags, "|")
	}
	return strings.Join(parts, ", ")
}

// shortTag is a tag as a display name shows it: a digest cut to its first
// digestShown hex digits.
func shortTag(tag string) string {
	if hex, ok := strings.CutPrefix(tag, "sha256:"); ok && len(hex) > digestShown {
		return "sha256:" + hex[:digestShown]
	}
	return tag
}
