// Package migration loads a store's versioned schema migrations: files
// NNNN_description.sql, embedded in the store's package, applied in order.
// Each store applies them its own way (its SQL dialect, its locking).
package migration

import (
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// Migration is one schema step: NNNN_name.sql brings the schema to version
// NNNN.
type Migration struct {
	Version int64
	Name    string // the file's name
	SQL     string
}

// MustLoad is Load for migrations embedded in the binary: a bad one is a
// build mistake that every test catches, so it panics.
func MustLoad(fsys fs.FS, dir string) []Migration {
	ms, err := Load(fsys, dir)
	if err != nil {
		panic(err)
	}
	return ms
}

// Load reads dir/*.sql. Versions must be 1, 2, 3... with no gap.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, name := range names { // fs.Glob sorts
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must be NNNN_description.sql", name)
		}
		if want := int64(len(ms) + 1); v != want {
			return nil, fmt.Errorf("migration %s: version %d, want %d (versions start at 1 with no gaps)", name, v, want)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: base, SQL: string(b)})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations in %s", dir)
	}
	return ms, nil
}
