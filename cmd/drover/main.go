// Command drover is the drover CLI, server and agent in one binary.
package main

import (
	"os"
	_ "time/tzdata" // time zones for allowedTimes windows on hosts without tzdata

	"github.com/drover-dev/drover/internal/cli"
	"github.com/drover-dev/drover/internal/daemon"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr, daemon.Commands()...))
}
