// Command gen writes docs/schema/drover.schema.json, the JSON Schema of
// drover's config files. Run it with `go generate ./internal/config/schema/`
// (or `make generate`); it reads the config package's source for doc comments.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/drover-dev/drover/internal/config/schema"
)

func main() {
	src := flag.String("src", "..", "directory of the config package's source")
	out := flag.String("out", "../../../docs/schema/drover.schema.json", "file to write")
	flag.Parse()
	if err := run(*src, *out); err != nil {
		fmt.Fprintln(os.Stderr, "schema gen:", err)
		os.Exit(1)
	}
}

func run(srcDir, out string) error {
	src, err := schema.ReadSource(srcDir)
	if err != nil {
		return err
	}
	data, err := schema.Generate(src)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(out); err == nil && bytes.Equal(old, data) {
		return nil // unchanged: keep the file's modification time
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o750); err != nil {
		return err
	}
	// Write a temporary file and rename it, so an interrupted run never
	// leaves a truncated schema behind.
	tmp, err := os.CreateTemp(filepath.Dir(out), ".drover.schema-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	cerr := tmp.Chmod(0o644)
	_, werr := tmp.Write(data)
	if err := errors.Join(cerr, werr, tmp.Close()); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}
