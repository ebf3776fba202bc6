// Package examples embeds the example config trees so that `drover dev` can
// run the quickstart from any directory.
package examples

import "embed"

// Quickstart is examples/quickstart: two fake runtimes, an application with
// staging and prod (prod after staging is stable and an approval), and one
// Kubernetes-YAML service with an image parameter.
//
//go:embed quickstart
var Quickstart embed.FS
