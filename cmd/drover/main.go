// Command drover is the drover CLI, server and agent in one binary.
package main

import (
	"os"
	_ "time/tzdata" // time zones for allowedTimes windows on hosts without tzdata

	"github.com/drover-dev/drover/internal/cli"
	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/daemon"
)

func main() {
	// A chart render's child process (docs/security.md) is this executable
	// started again; it renders one chart and ends here.
	if code, ok := compiler.ChartRenderer(os.Args[1:]); ok {
		os.Exit(code)
	}
	compiler.IsolateCharts()
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr, daemon.Commands()...))
}
