// Command drover is the drover CLI, server and agent in one binary.
package main

import (
	"os"

	"github.com/drover-dev/drover/internal/cli"
	_ "time/tzdata" // time zones for allowedTimes windows on hosts without tzdata
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
