// Package datadir prepares a server's data directory: it creates it (or
// tightens an existing one) to mode 0700, and holds an exclusive lock on it
// for the server's life so that two servers never share one database (two
// engines on one store would both apply every change).
//
// The lock is an flock(2) on DIR/drover.lock. The kernel releases it when the
// process exits, however it exits (kill -9 included), so a stale lock file
// never blocks a restart. The file holds the holder's PID, start time and
// listen address, for the message the next server prints.
package datadir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// LockFile is the name of the lock file inside the data directory.
const LockFile = "drover.lock"

// ErrInUse is returned by Acquire when another process holds the directory.
var ErrInUse = errors.New("data directory in use")

// Holder describes the process that holds a data directory.
type Holder struct {
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"startedAt"`
	// Listen is the API address, empty until the server listens.
	Listen string `json:"listen,omitempty"`
}

// InUseError says which process holds the data directory.
type InUseError struct {
	Dir    string
	Holder Holder // zero when the lock file could not be read
}

func (e *InUseError) Error() string {
	msg := "data directory " + e.Dir + " is in use by drover server"
	if e.Holder.PID > 0 {
		msg += fmt.Sprintf(" PID %d", e.Holder.PID)
	}
	if e.Holder.Listen != "" {
		msg += " (listening on " + e.Holder.Listen + ")"
	}
	return msg + ": stop it first, or choose another --data"
}

func (e *InUseError) Unwrap() error { return ErrInUse }

// Lock is a held data directory. Release (or the process's exit) frees it.
type Lock struct {
	f      *os.File
	holder Holder
}

// Prepare creates dir with mode 0700, or tightens an existing directory to
// 0700 when it is drover's (empty, or holding a database, lock or token):
// the database holds secrets (see the S8 finding). A directory that holds
// other files, or has the sticky bit (such as /tmp), is never changed: a
// mistyped --data must not take a shared directory away from its other
// users. The warning (nil when all is well) says when the directory stays
// readable by others; err is set when dir cannot be created or is not a
// directory.
func Prepare(dir string) (warning, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("data directory %s is not a directory", dir)
	}
	perm := fi.Mode().Perm()
	if perm == 0o700 {
		return nil, nil
	}
	if fi.Mode()&os.ModeSticky != 0 || !drovers(dir) {
		if perm&0o077 == 0 {
			return nil, nil
		}
		shown := uint32(perm)
		if fi.Mode()&os.ModeSticky != 0 {
			shown |= 0o1000 // as ls and chmod write it, e.g. 1777 for /tmp
		}
		return fmt.Errorf("data directory %s has mode %04o and is shared or holds files that are not drover's, so it was left as is: drover's own files in it are private (0600), but give drover a directory of its own", dir, shown), nil
	}
	if err := os.Chmod(dir, 0o700); err != nil { //nolint:gosec // G302: a directory needs its x bit; 0700 is owner-only
		return fmt.Errorf("data directory %s has mode %04o and cannot be made 0700 (%w): other local users may read its database", dir, perm, err), nil
	}
	return nil, nil
}

// drovers reports whether dir is empty or holds one of the files a drover
// server keeps there.
func drovers(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	if len(entries) == 0 {
		return true
	}
	for _, e := range entries {
		switch e.Name() {
		case "drover.db", LockFile, "token", "secrets.key":
			return true
		}
	}
	return false
}

// Acquire takes the exclusive lock of dir (which must exist) without
// waiting. When another process holds it, the error is an *InUseError that
// names its PID and address.
func Acquire(dir string) (*Lock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := flock(f); err != nil {
		holder, _ := readHolder(f)
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &InUseError{Dir: dir, Holder: holder}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	l := &Lock{f: f, holder: Holder{PID: os.Getpid(), StartedAt: time.Now().UTC()}}
	if err := l.write(); err != nil {
		_ = l.Release()
		return nil, err
	}
	return l, nil
}

// SetListen records the API address in the lock file, for the message a
// second server prints.
func (l *Lock) SetListen(addr string) error {
	l.holder.Listen = addr
	return l.write()
}

// Release unlocks the directory. The lock file stays (removing it would race
// with a server that is opening it).
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor releases the flock
	l.f = nil
	return err
}

func (l *Lock) write() error {
	b, err := json.Marshal(l.holder)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("write lock file: %w", err)
	}
	if _, err := l.f.WriteAt(b, 0); err != nil {
		return fmt.Errorf("write lock file: %w", err)
	}
	return nil
}

// flock takes an exclusive flock on f without blocking, retrying on EINTR.
func flock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) //nolint:gosec // G115: a file descriptor fits an int
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// readHolder reads the holder a lock file describes (best effort: the holder
// may be writing it).
func readHolder(f *os.File) (Holder, error) {
	var h Holder
	b := make([]byte, 4096)
	n, err := f.ReadAt(b, 0)
	if err != nil && n == 0 {
		return h, err
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(b[:n]))), &h); err != nil {
		return Holder{}, err
	}
	return h, nil
}
