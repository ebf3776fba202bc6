package sqlite

import (
	"encoding/binary"
	"fmt"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// The instance cache keeps each row packed in one string instead of as a
// store.Instance: a row has about two dozen pointer fields (its strings,
// lists and times), and the cache holds every instance of every service
// for as long as the server runs, so the garbage collector would visit
// each of them at every cycle (with 100,000 instances, millions of
// pointers per cycle). A packed row is one pointer to bytes the collector
// does not look into; reading one back is a decode whose strings are
// slices of the packed string (no copy).

// packedRow is one cached instance row: its release channel and revision,
// which the cache looks rows up by, and the whole row packed.
type packedRow struct {
	rc     string
	rev    int64
	packed string
}

// packRow packs in (a row as stored: see storedInstance).
func packRow(in *store.Instance) packedRow {
	var stack [512]byte
	b := packString(packString(stack[:0], in.Application), in.Service)
	b = binary.AppendVarint(b, int64(len(in.ReleaseChannel)))
	rcAt := len(b)
	b = append(b, in.ReleaseChannel...)
	for _, s := range [...]string{in.DesiredStateID,
		in.TargetStateID, in.TargetVersion, in.CurrentStateID, in.CurrentVersion, string(in.Status),
		string(in.Reason), in.Message, in.PreviousStateID, in.PreviousVersion, in.DesiredVersion,
		in.RollbackFrom, in.RollbackReason, in.FailedVersion, in.RuntimeMemo} {
		b = packString(b, s)
	}
	b = packBool(b, in.Paused)
	b = packBool(b, in.ActionPending)
	for _, n := range [...]int64{int64(in.ApplyAttempts), int64(in.Healed), int64(in.ActionSeq), in.Revision} {
		b = binary.AppendVarint(b, n)
	}
	for _, t := range [...]time.Time{in.LastApplyAt, in.ConvergedAt, in.UpdatedAt, in.AppliedAt} {
		b = packTime(b, t)
	}
	b = packStrings(b, in.Satisfied)
	b = packCount(b, in.Checks == nil, len(in.Checks))
	for _, c := range in.Checks {
		b = packString(b, c.Key)
		b = packString(b, c.DesiredStateID)
		b = packBool(b, c.Passed)
		b = packString(b, c.Error)
		b = packString(b, c.Message)
		b = packTime(b, c.At)
		b = binary.AppendVarint(b, int64(c.Runs))
	}
	packed := string(b)
	// The key is a slice of the packed string: no other string to keep.
	return packedRow{rc: packed[rcAt : rcAt+len(in.ReleaseChannel)], rev: in.Revision, packed: packed}
}

// unpack returns the row packRow packed, with slices of its own. It fails
// only on what packRow did not write (a bug: the cache then reads the file).
func (r packedRow) unpack() (store.Instance, error) {
	u := unpacker{s: r.packed}
	var in store.Instance
	for _, p := range [...]*string{&in.Application, &in.Service, &in.ReleaseChannel, &in.DesiredStateID,
		&in.TargetStateID, &in.TargetVersion, &in.CurrentStateID, &in.CurrentVersion} {
		*p = u.string()
	}
	in.Status = ds.Status(u.string())
	in.Reason = ds.Reason(u.string())
	for _, p := range [...]*string{&in.Message, &in.PreviousStateID, &in.PreviousVersion, &in.DesiredVersion,
		&in.RollbackFrom, &in.RollbackReason, &in.FailedVersion, &in.RuntimeMemo} {
		*p = u.string()
	}
	in.Paused = u.bool()
	in.ActionPending = u.bool()
	in.ApplyAttempts, in.Healed, in.ActionSeq = int(u.varint()), int(u.varint()), int(u.varint())
	in.Revision = u.varint()
	for _, p := range [...]*time.Time{&in.LastApplyAt, &in.ConvergedAt, &in.UpdatedAt, &in.AppliedAt} {
		*p = u.time()
	}
	in.Satisfied = u.strings()
	if n, isNil := u.count(); !isNil {
		in.Checks = make([]store.CheckResult, n)
		for i := range in.Checks {
			c := &in.Checks[i]
			c.Key, c.DesiredStateID = u.string(), u.string()
			c.Passed = u.bool()
			c.Error, c.Message = u.string(), u.string()
			c.At = u.time()
			c.Runs = int(u.varint())
		}
	}
	if u.err == nil && u.i != len(u.s) {
		u.err = fmt.Errorf("%d bytes left over", len(u.s)-u.i)
	}
	if u.err != nil {
		return store.Instance{}, fmt.Errorf("instance cache: packed row of release channel %s: %w", r.rc, u.err)
	}
	return in, nil
}

func packString(b []byte, s string) []byte {
	b = binary.AppendVarint(b, int64(len(s)))
	return append(b, s...)
}

func packBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// packCount packs a list's length, telling a nil list from an empty one.
func packCount(b []byte, isNil bool, n int) []byte {
	if isNil {
		return binary.AppendVarint(b, -1)
	}
	return binary.AppendVarint(b, int64(n))
}

func packStrings(b []byte, list []string) []byte {
	b = packCount(b, list == nil, len(list))
	for _, s := range list {
		b = packString(b, s)
	}
	return b
}

// packTime packs t as stored: UTC to the nanosecond without a monotonic
// reading, or the zero time (storedTime).
func packTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendVarint(b, int64(t.Nanosecond()))
}

// unpacker reads what the pack functions wrote; a malformed input sets err
// and reads zeros from then on.
type unpacker struct {
	s   string
	i   int
	err error
}

func (u *unpacker) uvarint() uint64 {
	if u.err != nil {
		return 0
	}
	var x uint64
	for shift := 0; u.i < len(u.s) && shift < 64; shift += 7 {
		c := u.s[u.i]
		u.i++
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x
		}
	}
	u.err = fmt.Errorf("bad varint at byte %d", u.i)
	return 0
}

func (u *unpacker) varint() int64 {
	x := u.uvarint()
	n := int64(x >> 1)
	if x&1 != 0 {
		n = ^n
	}
	return n
}

func (u *unpacker) byte() byte {
	if u.err != nil {
		return 0
	}
	if u.i >= len(u.s) {
		u.err = fmt.Errorf("short at byte %d", u.i)
		return 0
	}
	c := u.s[u.i]
	u.i++
	return c
}

func (u *unpacker) bool() bool { return u.byte() == 1 }

func (u *unpacker) string() string {
	n, ok := u.length()
	if !ok {
		return ""
	}
	s := u.s[u.i : u.i+n]
	u.i += n
	return s
}

// length reads a length of at most what is left to read.
func (u *unpacker) length() (int, bool) {
	x := u.varint()
	if u.err != nil {
		return 0, false
	}
	if x < 0 || x > int64(len(u.s)-u.i) {
		u.err = fmt.Errorf("length %d past the end at byte %d", x, u.i)
		return 0, false
	}
	return int(x), true
}

// count reads packCount's length (each element takes a byte at least).
func (u *unpacker) count() (n int, isNil bool) {
	if u.err == nil && u.i < len(u.s) && u.s[u.i] == 1 { // -1, zigzag-encoded
		u.i++
		return 0, true
	}
	n, ok := u.length()
	return n, !ok
}

func (u *unpacker) strings() []string {
	n, isNil := u.count()
	if isNil {
		return nil
	}
	list := make([]string, n)
	for i := range list {
		list[i] = u.string()
	}
	return list
}

func (u *unpacker) time() time.Time {
	if u.byte() == 0 {
		return time.Time{}
	}
	sec, nsec := u.varint(), u.varint()
	return time.Unix(sec, nsec).UTC()
}
