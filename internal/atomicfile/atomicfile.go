// Package atomicfile replaces files so that a process killed at any instant
// leaves either the old content or the new one, never a torn file.
package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
)

// Write replaces path with data and perm: it writes a temporary file beside
// it, syncs it, renames it over path, and syncs the directory so the rename
// itself survives a crash (where the platform can sync directories).
func Write(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = errors.Join(f.Chmod(perm), f.Sync()); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
