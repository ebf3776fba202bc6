package fake

import (
	"cmp"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/atomicfile"
	"github.com/drover-dev/drover/internal/runtimes"
)

// stateFormat identifies the state file layout.
const stateFormat = "drover.fake-runtime/v1"

// sum is a SHA-256 content hash, hex in the state file.
type sum [32]byte

func (s sum) MarshalText() ([]byte, error) { return hex.AppendEncode(nil, s[:]), nil }

func (s *sum) UnmarshalText(b []byte) error {
	if hex.DecodedLen(len(b)) != len(s) {
		return fmt.Errorf("hash %q: want %d hex digits", b, 2*len(s))
	}
	_, err := hex.Decode(s[:], b)
	return err
}

type fileState struct {
	Format    string         `json:"format"`
	Runtime   string         `json:"runtime"`
	Instances []fileInstance `json:"instances"`
}

type fileInstance struct {
	Key             runtimes.InstanceKey `json:"key"`
	Version         string               `json:"version"`
	DesiredStateID  string               `json:"desiredStateId,omitempty"`
	StartedAt       time.Time            `json:"startedAt"`
	RolloutDuration string               `json:"rolloutDuration"`
	Fails           bool                 `json:"fails,omitempty"`
	Drifted         bool                 `json:"drifted,omitempty"`
	Hash            sum                  `json:"hash"`
	Objects         []fileObject         `json:"objects"`
}

type fileObject struct {
	ObjectType string `json:"objectType"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	Replicas   int32  `json:"replicas"`
	Hash       sum    `json:"hash"`
}

func statePath(dir, name string) (string, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return "", fmt.Errorf("fake runtime %q: name cannot be used in a file name", name)
	}
	return filepath.Join(dir, "fake-"+name+".json"), nil
}

// load reads the state file, if any, and re-arms the rollouts in progress.
func (r *Runtime) load() error {
	dir := filepath.Dir(r.path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("fake runtime %s: %w", r.name, err)
	}
	// Temporary files of writes cut short by a crash: the rename never
	// happened, so the state file itself is intact.
	if stale, err := filepath.Glob(filepath.Join(dir, "."+filepath.Base(r.path)+".tmp-*")); err == nil {
		for _, f := range stale {
			_ = os.Remove(f)
		}
	}
	data, err := os.ReadFile(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fake runtime %s: reading state: %w", r.name, err)
	}
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("fake runtime %s: state file %s is corrupt: %s; move it away to start with an empty simulated cluster",
			r.name, r.path, fmt.Sprintf(format, args...))
	}
	var fst fileState
	if err := json.Unmarshal(data, &fst); err != nil {
		return corrupt("%v", err)
	}
	if fst.Format != stateFormat {
		return corrupt("format %q, want %q", fst.Format, stateFormat)
	}
	if fst.Runtime != r.name {
		return corrupt("it belongs to runtime %q", fst.Runtime)
	}
	now := r.now()
	for i, fi := range fst.Instances {
		k := fi.Key
		if k.Application == "" || k.Service == "" || k.ReleaseChannel == "" {
			return corrupt("instance %d: incomplete key %q", i, k)
		}
		if r.insts[k] != nil {
			return corrupt("instance %s given twice", k)
		}
		d, err := time.ParseDuration(fi.RolloutDuration)
		if err != nil || d < 0 {
			return corrupt("instance %s: rollout duration %q", k, fi.RolloutDuration)
		}
		in := &instance{
			version:        fi.Version,
			desiredStateID: fi.DesiredStateID,
			start:          fi.StartedAt,
			duration:       d,
			fails:          fi.Fails,
			drifted:        fi.Drifted,
			hash:           fi.Hash,
			objects:        make([]object, len(fi.Objects)),
		}
		var total int64
		for j, fo := range fi.Objects {
			if fo.Replicas < 0 || fo.ObjectType == "" || fo.Name == "" {
				return corrupt("instance %s: object %d: invalid", k, j)
			}
			in.objects[j] = object{typ: fo.ObjectType, namespace: fo.Namespace, name: fo.Name,
				key: objectKey(fo.ObjectType, fo.Namespace, fo.Name), replicas: fo.Replicas, hash: fo.Hash}
			total += int64(fo.Replicas)
		}
		if total > 1<<31-1 {
			return corrupt("instance %s: too many replicas", k)
		}
		in.replicas = int32(total)
		r.gen++
		in.gen = r.gen
		r.insts[k] = in
		// Rollouts in progress go on from their recorded start.
		if end := in.start.Add(in.duration); in.duration > 0 && end.After(now) {
			r.events.push(event{at: end, key: k, gen: in.gen})
		}
	}
	if len(r.events) > 0 {
		// The timer may fire at once, and Tick takes the lock: arm it
		// under the lock too.
		r.mu.Lock()
		r.armLocked(now)
		r.mu.Unlock()
	}
	return nil
}

func (r *Runtime) markDirtyLocked() {
	if r.path == "" {
		return
	}
	r.dirty = true
	select {
	case r.dirtyCh <- struct{}{}:
	default:
	}
}

// saveSpacing bounds the share of time the saver spends writing: it waits at
// least this many times as long as its last write took.
const saveSpacing = 20

// saver writes the state when it is dirty, at most once per SaveInterval,
// and, for a large simulated cluster whose file takes long to write, at most
// once per saveSpacing times the last write's duration: the whole file is
// written each time, so saving must not take most of the process's time.
func (r *Runtime) saver() {
	defer close(r.saverDone)
	t := time.NewTimer(0)
	<-t.C
	for {
		select {
		case <-r.dirtyCh:
		case <-r.done:
			return
		}
		start := time.Now()
		_ = r.Flush() // a failure keeps the state dirty; Close reports it
		t.Reset(max(r.settings.SaveInterval, saveSpacing*time.Since(start)))
		select {
		case <-t.C:
		case <-r.done:
			return
		}
	}
}

// Flush writes the state file now if it changed since the last write.
func (r *Runtime) Flush() error {
	if r.path == "" {
		return nil
	}
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	r.mu.Lock()
	if !r.dirty {
		r.mu.Unlock()
		return nil
	}
	// Copy the records under the lock; encode and write outside it.
	snap := make([]fileInstance, 0, len(r.insts))
	insts := make([]instance, 0, len(r.insts))
	for k, in := range r.insts {
		snap = append(snap, fileInstance{Key: k})
		insts = append(insts, *in)
	}
	r.dirty = false
	r.mu.Unlock()

	for i := range snap {
		in := &insts[i]
		fi := &snap[i]
		fi.Version, fi.DesiredStateID = in.version, in.desiredStateID
		fi.StartedAt, fi.RolloutDuration = in.start.Round(0), in.duration.String()
		fi.Fails, fi.Drifted, fi.Hash = in.fails, in.drifted, in.hash
		fi.Objects = make([]fileObject, len(in.objects))
		for j, o := range in.objects {
			fi.Objects[j] = fileObject{ObjectType: o.typ, Namespace: o.namespace, Name: o.name, Replicas: o.replicas, Hash: o.hash}
		}
	}
	slices.SortFunc(snap, func(a, b fileInstance) int {
		return cmp.Or(cmp.Compare(a.Key.Application, b.Key.Application),
			cmp.Compare(a.Key.Service, b.Key.Service),
			cmp.Compare(a.Key.ReleaseChannel, b.Key.ReleaseChannel))
	})
	data, err := json.Marshal(fileState{Format: stateFormat, Runtime: r.name, Instances: snap})
	if err == nil {
		err = atomicfile.Write(r.path, data, 0o600)
	}
	if err != nil {
		r.mu.Lock()
		r.markDirtyLocked() // retry on the saver's next round
		r.mu.Unlock()
		return fmt.Errorf("fake runtime %s: saving state: %w", r.name, err)
	}
	r.saves.Add(1)
	return nil
}
