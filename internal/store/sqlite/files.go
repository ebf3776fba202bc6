package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	sqlite3 "modernc.org/sqlite"
	sqlitelib "modernc.org/sqlite/lib"
)

// The database's files on disk: their modes (S8), the marker that says the
// directory held a database (B22), the identity that notices a removed or
// replaced database (B4), and readable messages for a full disk (B23).

// MarkerSuffix names the sidecar file written next to the database once it
// has been created: DIR/drover.db.created. A database that is missing or
// empty while its marker exists is refused rather than silently recreated.
const MarkerSuffix = ".created"

// ErrReplaced is returned by every write and by Check once the database file
// or its directory was removed or replaced under the running store.
var ErrReplaced = errors.New("data directory removed or replaced under the running server; restart it")

// ErrMissing is returned by Open when the database is missing or empty but
// its marker says the directory held one.
var ErrMissing = errors.New("database missing or empty")

// fileID identifies a file across renames: device and inode.
type fileID struct{ dev, ino uint64 }

func statID(path string) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fileID{}, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, nil //nolint:unconvert // Dev is not uint64 everywhere
}

// identity is what Open saw of the database file and its directory.
type identity struct {
	path, dir   string
	file, dirID fileID
}

func newIdentity(path string) (identity, error) {
	id := identity{path: path, dir: filepath.Dir(path)}
	var err error
	if id.file, err = statID(path); err != nil {
		return id, err
	}
	if id.dirID, err = statID(id.dir); err != nil {
		return id, err
	}
	return id, nil
}

// check fails with ErrReplaced when the database file or its directory is
// no longer the one opened (removed, renamed away, or another file moved in).
func (id identity) check() error {
	for _, f := range []struct {
		path string
		want fileID
	}{{id.dir, id.dirID}, {id.path, id.file}} {
		got, err := statID(f.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%s is gone: %w", f.path, ErrReplaced)
		case err != nil:
			return fmt.Errorf("check %s: %w", f.path, err)
		case got != f.want:
			return fmt.Errorf("%s was replaced by another file: %w", f.path, ErrReplaced)
		}
	}
	return nil
}

// prepareFile runs before SQLite opens path. It refuses a database that is
// missing or empty while its marker says it existed, creates a new database
// file with mode 0600 (SQLite gives its -wal and -shm files the database
// file's mode), and tightens existing files to 0600.
func prepareFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s is a directory", path)
	}
	exists := err == nil
	if !exists || fi.Size() == 0 {
		if err := refuseIfUsedBefore(path, exists); err != nil {
			return err
		}
	}
	if !exists {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if f != nil {
			_ = f.Close()
		}
	}
	return tightenFiles(path)
}

// refuseIfUsedBefore fails when path's marker exists: the database that was
// there is gone (a failed copy, a restore to the wrong place, a truncation),
// and starting empty would silently drop every config and rollout.
func refuseIfUsedBefore(path string, exists bool) error {
	marker := path + MarkerSuffix
	if _, err := os.Stat(marker); err != nil {
		return nil //nolint:nilerr // no marker (or unreadable): a new database
	}
	if wal, err := os.Stat(path + "-wal"); exists && err == nil && wal.Size() > 0 {
		return nil // the data may all be in the write-ahead log; SQLite decides
	}
	state := "is missing"
	if exists {
		state = "is empty (0 bytes)"
	}
	return fmt.Errorf("database %s %s, but %s says this directory held a drover database: "+
		"restore %s from a backup, or, to start an empty server, move %s and %s aside: %w",
		path, state, marker, filepath.Base(path), filepath.Base(path), filepath.Base(marker), ErrMissing)
}

// tightenFiles makes the database and its -wal and -shm files 0600 (they
// hold configs, compiled desired states and run output, secrets included).
func tightenFiles(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm", path + MarkerSuffix} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, 0o600); err != nil {
				return fmt.Errorf("make %s private (mode 0600): %w", p, err)
			}
		}
	}
	return nil
}

// writeMarker records that path holds a drover database, once.
func writeMarker(path string) error {
	marker := path + MarkerSuffix
	f, err := os.OpenFile(marker, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("write marker %s: %w", marker, err)
	}
	_, err = fmt.Fprintf(f, "%s was created as a drover database at %s.\n"+
		"drover refuses to start on an empty or missing %[1]s while this file exists.\n",
		filepath.Base(path), time.Now().UTC().Format(time.RFC3339))
	return errors.Join(err, f.Close())
}

// lowSpace is the free space under which an I/O error is taken for a full
// disk: SQLite needs a few pages and a 32 KiB shared-memory file to start.
const lowSpace = 1 << 20

// freeSpace returns the bytes available to this user on dir's file system.
var freeSpace = func(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil //nolint:gosec // Bsize is positive
}

// explainDiskFull rewrites err when it means the data directory's file
// system is full: SQLITE_FULL, ENOSPC, or an I/O error (SQLite reports a full
// disk while it sizes its shared-memory file as "disk I/O error (4874)")
// with less than lowSpace free. Other errors are returned unchanged.
func explainDiskFull(dir string, err error) error {
	if err == nil {
		return nil
	}
	full := errors.Is(err, syscall.ENOSPC)
	var se *sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlitelib.SQLITE_FULL:
			full = true
		case sqlitelib.SQLITE_IOERR:
			if free, ferr := freeSpace(dir); ferr == nil && free < lowSpace {
				full = true
			}
		}
	}
	if !full {
		return err
	}
	return fmt.Errorf("no space left on device on %s: free some space and start again (%w)", dir, err)
}
