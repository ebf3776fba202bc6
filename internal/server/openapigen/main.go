// Command openapigen writes the API's OpenAPI document (made from the
// server's route table) to the file its argument names: api/openapi.json,
// at go generate time.
package main

import (
	"fmt"
	"os"

	"github.com/drover-dev/drover/internal/atomicfile"
	"github.com/drover-dev/drover/internal/server"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: openapigen FILE")
		os.Exit(64)
	}
	doc, err := server.OpenAPIDocument()
	if err == nil {
		err = atomicfile.Write(os.Args[1], doc, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapigen:", err)
		os.Exit(1)
	}
}
