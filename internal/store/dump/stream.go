package dump

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// Format is the header's "format".
const Format = "drover-dump"

// Version is the version of the format this package writes, and the newest
// it reads.
const Version = 1

// kindEnd is the kind of the line that closes a dump.
const kindEnd Kind = "end"

// Header is the first line of a dump.
type Header struct {
	// Format is always Format.
	Format string `json:"format"`
	// Version is the format's version.
	Version int `json:"version"`
	// ExportedAt is when the export began.
	ExportedAt time.Time `json:"exportedAt"`
	// Store is the kind of store exported ("sqlite", "postgres"), for people.
	Store string `json:"store,omitempty"`
}

// line is a record line.
type line struct {
	Kind   Kind `json:"kind"`
	Record any  `json:"record"`
}

// end is the record of the line that closes a dump.
type end struct {
	// Records counts the record lines between the header and this line.
	Records int `json:"records"`
}

// Writer writes a dump. Its Close writes the end line, without which a
// reader refuses the dump.
type Writer struct {
	buf    *bufio.Writer
	enc    *json.Encoder
	counts Counts
	last   Kind
	closed bool
}

// NewWriter writes the header h to w (Format and Version are set, and a zero
// ExportedAt becomes the current time) and returns a Writer of the records
// that follow.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	h.Format, h.Version = Format, Version
	if h.ExportedAt.IsZero() {
		h.ExportedAt = time.Now()
	}
	h.ExportedAt = h.ExportedAt.UTC().Round(0)
	buf := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	dw := &Writer{buf: buf, enc: enc, counts: Counts{}, last: KindConfig}
	if err := enc.Encode(h); err != nil {
		return nil, fmt.Errorf("write dump header: %w", err)
	}
	return dw, nil
}

// Write writes one record. Records must come in the order of Kinds.
func (w *Writer) Write(r Record) error {
	if w.closed {
		return errors.New("write dump: the dump is closed")
	}
	k := r.RecordKind()
	if k.rank() < w.last.rank() {
		return fmt.Errorf("write dump: %s after %s: records must come in the order of their kinds", k.plural(), w.last.plural())
	}
	if err := w.enc.Encode(line{Kind: k, Record: r}); err != nil {
		return fmt.Errorf("write dump: %s record: %w", k, err)
	}
	w.last = k
	w.counts[k]++
	return nil
}

// Close writes the end line and flushes; it does not close the underlying
// writer.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if err := w.enc.Encode(line{Kind: kindEnd, Record: end{Records: w.counts.Total()}}); err != nil {
		return fmt.Errorf("write dump: %w", err)
	}
	if err := w.buf.Flush(); err != nil {
		return fmt.Errorf("write dump: %w", err)
	}
	return nil
}

// Counts returns the records written so far, by kind.
func (w *Writer) Counts() Counts { return copyCounts(w.counts) }

func copyCounts(c Counts) Counts {
	out := make(Counts, len(c))
	for k, n := range c {
		out[k] = n
	}
	return out
}

// Reader reads a dump and checks it as it goes: its header, that each line
// is a known record in the order of Kinds, that records refer to records
// before them (an approval to its desired state, a shared compiled copy to
// the desired state holding it, a delivery not yet delivered to its target
// and event), that ids and sequence numbers increase, that
// what a store keeps unique is (API tokens' hashes, the names of tokens not
// revoked), and that the end line closes it. Its errors name the line.
type Reader struct {
	r      *bufio.Reader
	line   int
	header Header
	counts Counts
	last   Kind
	done   bool
	// err is the error Next returned, returned again by later calls.
	err error

	// What later records are checked against.
	states              map[string]bool // desired state id -> holds its own compiled copy
	lastSeq, lastRun    int64
	lastTask, lastProcs int64
	// secrets counts the secret versions read; secretKey and
	// secretVersion name the last.
	secrets            int
	secretKey          string
	secretVersion      int64
	lastToken, lastAud int64
	// targets holds the names of the notification targets read (in
	// order: lastTarget is the last); lastDelivery the last delivery id.
	targets      map[string]bool
	lastTarget   string
	lastDelivery int64
	// tokenHashes and liveTokens give the id of the API token with a hash,
	// and of the token not revoked with a name.
	tokenHashes, liveTokens map[string]int64
}

// NewReader reads and checks the header of the dump r holds. A dump of a
// newer version than Version is refused.
func NewReader(r io.Reader) (*Reader, error) {
	dr := &Reader{
		r: bufio.NewReaderSize(r, 64<<10), counts: Counts{}, last: KindConfig, states: map[string]bool{},
		tokenHashes: map[string]int64{}, liveTokens: map[string]int64{}, targets: map[string]bool{},
	}
	b, err := dr.readLine()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("read dump: the input is empty, not a drover dump")
	}
	if err != nil {
		return nil, err
	}
	var h Header
	if err := json.Unmarshal(b, &h); err != nil || h.Format != Format {
		return nil, fmt.Errorf("read dump: line 1: not a drover dump (no %q header)", Format)
	}
	switch {
	case h.Version > Version:
		return nil, fmt.Errorf("read dump: line 1: the dump is of format version %d, newer than this drover reads (version %d): import it with a newer drover",
			h.Version, Version)
	case h.Version < 1:
		return nil, fmt.Errorf("read dump: line 1: invalid format version %d", h.Version)
	}
	dr.header = h
	return dr, nil
}

// Header returns the dump's header.
func (r *Reader) Header() Header { return r.header }

// Counts returns the records read so far, by kind.
func (r *Reader) Counts() Counts { return copyCounts(r.counts) }

// Line is the number of the last line read (the header is line 1).
func (r *Reader) Line() int { return r.line }

// Next returns the next record, or io.EOF once the end line was read (and
// nothing follows it).
func (r *Reader) Next() (Record, error) {
	if r.err != nil {
		return nil, r.err
	}
	rec, err := r.next()
	if err != nil {
		r.err = err
	}
	return rec, err
}

func (r *Reader) next() (Record, error) {
	if r.done {
		return nil, io.EOF
	}
	b, err := r.readLine()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read dump: line %d: the dump ends without its end line: it is truncated", r.line)
	}
	if err != nil {
		return nil, err
	}
	var l struct {
		Kind   Kind            `json:"kind"`
		Record json.RawMessage `json:"record"`
	}
	if err := strict(b, &l); err != nil {
		return nil, r.errorf("not a dump record: %v", err)
	}
	if l.Kind == "" {
		return nil, r.errorf("not a dump record: no kind")
	}
	if len(l.Record) == 0 || string(l.Record) == "null" {
		return nil, r.errorf("%s line without its record", l.Kind)
	}
	if l.Kind == kindEnd {
		return nil, r.end(l.Record)
	}
	rec, err := decode(l.Kind, l.Record)
	if err != nil {
		return nil, r.errorf("%v", err)
	}
	if l.Kind.rank() < r.last.rank() {
		return nil, r.errorf("%s record after %s: records must come in the order of their kinds", l.Kind, r.last.plural())
	}
	if err := r.check(rec); err != nil {
		return nil, r.errorf("%s record: %v", l.Kind, err)
	}
	r.last = l.Kind
	r.counts[l.Kind]++
	return rec, nil
}

// end checks the end line and that nothing follows it.
func (r *Reader) end(raw json.RawMessage) error {
	var e end
	if err := strict(raw, &e); err != nil {
		return r.errorf("end line: %v", err)
	}
	if n := r.counts.Total(); e.Records != n {
		return r.errorf("the end line counts %d records, the dump holds %d", e.Records, n)
	}
	if _, err := r.readLine(); !errors.Is(err, io.EOF) {
		if err != nil {
			return err
		}
		return r.errorf("data after the end line")
	}
	r.done = true
	return io.EOF
}

func (r *Reader) errorf(format string, args ...any) error {
	return fmt.Errorf("read dump: line %d: %s", r.line, fmt.Sprintf(format, args...))
}

// readLine reads the next line without its "\n". A last line without "\n"
// is an error: the dump was cut in the middle of it.
func (r *Reader) readLine() ([]byte, error) {
	b, err := r.r.ReadBytes('\n')
	switch {
	case err == nil:
		r.line++
		return b[:len(b)-1], nil
	case errors.Is(err, io.EOF) && len(b) == 0:
		return nil, io.EOF
	case errors.Is(err, io.EOF):
		r.line++
		return nil, fmt.Errorf("read dump: line %d: the line is cut short (no line end): the dump is truncated", r.line)
	default:
		return nil, fmt.Errorf("read dump: after line %d: %w", r.line, err)
	}
}

// strict decodes b, a single JSON value, into v, refusing fields v does not
// have.
func strict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON value")
	}
	return nil
}

// decode decodes the record of a line of kind k.
func decode(k Kind, raw json.RawMessage) (Record, error) {
	var (
		rec Record
		err error
	)
	switch k {
	case KindConfig:
		rec, err = decodeAs[Config](raw)
	case KindDesiredState:
		rec, err = decodeAs[DesiredState](raw)
	case KindApproval:
		rec, err = decodeAs[Approval](raw)
	case KindInstance:
		rec, err = decodeAs[Instance](raw)
	case KindObservation:
		rec, err = decodeAs[Observation](raw)
	case KindEvent:
		rec, err = decodeAs[Event](raw)
	case KindTaskRun:
		rec, err = decodeAs[TaskRun](raw)
	case KindTask:
		rec, err = decodeAs[Task](raw)
	case KindLease:
		rec, err = decodeAs[Lease](raw)
	case KindRuntimeFacts:
		rec, err = decodeAs[RuntimeFacts](raw)
	case KindLinkedRuntime:
		rec, err = decodeAs[LinkedRuntime](raw)
	case KindAPIToken:
		rec, err = decodeAs[APIToken](raw)
	case KindAudit:
		rec, err = decodeAs[AuditRecord](raw)
	case KindSecret:
		rec, err = decodeAs[Secret](raw)
	case KindNotifyTarget:
		rec, err = decodeAs[NotifyTarget](raw)
	case KindDelivery:
		rec, err = decodeAs[Delivery](raw)
	case KindProcess:
		rec, err = decodeAs[Process](raw)
	default:
		return nil, fmt.Errorf("unknown record kind %q (a dump of a newer drover?)", k)
	}
	if err != nil {
		return nil, fmt.Errorf("%s record: %w", k, err)
	}
	return rec, nil
}

func decodeAs[T Record](raw json.RawMessage) (Record, error) {
	var v T
	if err := strict(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// check checks rec against the records before it.
func (r *Reader) check(rec Record) error {
	switch v := rec.(type) {
	case Config:
		if v.Kind == "" || v.Name == "" || v.Hash == "" || v.Version < 1 {
			return fmt.Errorf("config %s/%s version %d: kind, name, hash and a positive version are required", v.Kind, v.Name, v.Version)
		}
	case DesiredState:
		return r.checkDesiredState(v)
	case Approval:
		if _, ok := r.states[v.DesiredStateID]; !ok {
			return fmt.Errorf("approval of %q by %q: no desired state %q before it", v.Topic, v.User, v.DesiredStateID)
		}
		if v.Topic == "" || v.User == "" {
			return fmt.Errorf("approval of desired state %s: topic and user are required", v.DesiredStateID)
		}
	case Instance:
		if v.Application == "" || v.Service == "" || v.ReleaseChannel == "" || v.Revision < 1 {
			return fmt.Errorf("instance %s/%s/%s: application, service, release channel and a positive revision are required",
				v.Application, v.Service, v.ReleaseChannel)
		}
	case Observation:
		if v.Application == "" || v.Service == "" || v.ReleaseChannel == "" {
			return fmt.Errorf("observation %s/%s/%s: application, service and release channel are required",
				v.Application, v.Service, v.ReleaseChannel)
		}
	case Event:
		return increasing("event seq", v.Seq, &r.lastSeq)
	case TaskRun:
		if v.Application == "" || v.Service == "" || v.ReleaseChannel == "" || v.Kind == "" {
			return fmt.Errorf("task run %d: application, service, release channel and kind are required", v.ID)
		}
		return increasing("task run id", v.ID, &r.lastRun)
	case Task:
		if v.Key == "" || v.Kind == "" {
			return fmt.Errorf("task %d: key and kind are required", v.ID)
		}
		switch v.Status {
		case store.TaskPending, store.TaskRunning, store.TaskSucceeded, store.TaskFailed:
		default:
			return fmt.Errorf("task %d: unknown status %q", v.ID, v.Status)
		}
		return increasing("task id", v.ID, &r.lastTask)
	case Lease:
		if v.Key == "" || v.Token < 1 {
			return fmt.Errorf("lease %q: a key and a positive token are required", v.Key)
		}
	case RuntimeFacts:
		if v.Runtime == "" {
			return errors.New("runtime facts: runtime is required")
		}
	case LinkedRuntime:
		if v.Name == "" || v.TokenHash == "" {
			return fmt.Errorf("linked runtime %q: name and token hash are required", v.Name)
		}
	case APIToken:
		return r.checkToken(v)
	case AuditRecord:
		if v.Action == "" || v.Identity == "" || v.Outcome == "" || v.Time.IsZero() {
			return fmt.Errorf("audit record %d: time, identity, action and outcome are required", v.Seq)
		}
		return increasing("audit seq", v.Seq, &r.lastAud)
	case Secret:
		return r.checkSecret(v)
	case NotifyTarget:
		return r.checkNotifyTarget(v)
	case Delivery:
		return r.checkDelivery(v)
	case Process:
		return increasing("process id", v.ID, &r.lastProcs)
	}
	return nil
}

// checkSecret checks a version of a secret: a valid key, a version after
// the one before it (ordered by key and version), a creation time, and a
// value exactly when it is not deleted. Errors never quote the value.
func (r *Reader) checkSecret(v Secret) error {
	name := store.SecretVersionName(v.Key, v.Version)
	switch {
	case store.CheckSecretKey(v.Key) != nil || v.Version < 0 || v.CreatedAt.IsZero():
		return fmt.Errorf("secret %s: a valid key, a version of 0 or more and createdAt are required", name)
	case v.DeletedAt.IsZero() && len(v.Value) == 0:
		return fmt.Errorf("secret %s: a version not deleted needs its value", name)
	case !v.DeletedAt.IsZero() && v.Value != nil:
		return fmt.Errorf("secret %s: a deleted version has no value", name)
	case r.secrets > 0 && (v.Key < r.secretKey || v.Key == r.secretKey && v.Version <= r.secretVersion):
		return fmt.Errorf("secret %s after %s: they must be ordered by key and version", name, store.SecretVersionName(r.secretKey, r.secretVersion))
	}
	r.secrets, r.secretKey, r.secretVersion = r.secrets+1, v.Key, v.Version
	return nil
}

// checkNotifyTarget checks a notification target: what a store accepts
// of one (a valid name, a known kind, a filter of names), a creation
// time, and a name after the one before it (ordered by name, so each
// once). Errors never quote the spec.
func (r *Reader) checkNotifyTarget(v NotifyTarget) error {
	if err := v.Store().CheckPut(); err != nil {
		return err
	}
	switch {
	case v.CreatedAt.IsZero():
		return fmt.Errorf("notification target %s: createdAt is required", v.Name)
	case len(r.targets) > 0 && v.Name <= r.lastTarget:
		return fmt.Errorf("notification target %s after %s: they must be ordered by name", v.Name, r.lastTarget)
	}
	r.targets[v.Name], r.lastTarget = true, v.Name
	return nil
}

// checkDelivery checks a delivery: its fields, a known state, an id above
// the last one, and, unless it was delivered, a target before it and an
// event no later than the last one (a store deletes the deliveries not
// delivered of a target it deletes, and keeps their events).
func (r *Reader) checkDelivery(v Delivery) error {
	switch {
	case v.Target == "" || v.Key == "" || v.Type == "" || v.EventSeq < 1 || v.Attempts < 0 || v.NextAt.IsZero() || v.CreatedAt.IsZero():
		return fmt.Errorf("delivery %d: target, key, type, a positive eventSeq, attempts of 0 or more, nextAt and createdAt are required", v.ID)
	case v.State != store.DeliveryPending && v.State != store.DeliveryDelivered && v.State != store.DeliveryDead:
		return fmt.Errorf("delivery %d: unknown state %q", v.ID, v.State)
	case v.State == store.DeliveryDelivered && v.DeliveredAt.IsZero():
		return fmt.Errorf("delivery %d: a delivered delivery needs its deliveredAt", v.ID)
	case v.ClaimedUntil.IsZero() != (v.Owner == ""):
		return fmt.Errorf("delivery %d: owner and claimedUntil go together", v.ID)
	case v.State != store.DeliveryDelivered && !r.targets[v.Target]:
		return fmt.Errorf("delivery %d (%s): no notification target %q before it", v.ID, v.State, v.Target)
	case v.State != store.DeliveryDelivered && v.EventSeq > r.lastSeq:
		return fmt.Errorf("delivery %d (%s): event %d is not before it", v.ID, v.State, v.EventSeq)
	}
	return increasing("delivery id", v.ID, &r.lastDelivery)
}

// checkToken checks an API token: its fields, an id above the last one, a
// hash no token before it has, and, unless it is revoked, a name no token
// before it that is not revoked has. Errors never quote the hash.
func (r *Reader) checkToken(v APIToken) error {
	if v.Name == "" || v.Hash == "" || v.CreatedAt.IsZero() {
		return fmt.Errorf("api token %d (%q): name, hash and createdAt are required", v.ID, v.Name)
	}
	if v.RevokedAt.IsZero() && v.RevokedBy != "" {
		return fmt.Errorf("api token %d (%s): revokedBy is set but revokedAt is not", v.ID, v.Name)
	}
	if err := increasing("api token id", v.ID, &r.lastToken); err != nil {
		return err
	}
	if id, dup := r.tokenHashes[v.Hash]; dup {
		return fmt.Errorf("api token %d (%s) has the hash of api token %d", v.ID, v.Name, id)
	}
	r.tokenHashes[v.Hash] = v.ID
	if v.RevokedAt.IsZero() {
		if id, dup := r.liveTokens[v.Name]; dup {
			return fmt.Errorf("api token %d and api token %d are both named %s and neither is revoked", id, v.ID, v.Name)
		}
		r.liveTokens[v.Name] = v.ID
	}
	return nil
}

// checkDesiredState checks a desired state: a new id, and a compiled copy
// that is its own, shared with an earlier desired state holding one, or
// pruned.
func (r *Reader) checkDesiredState(v DesiredState) error {
	if v.ID == "" || v.Application == "" || v.Service == "" {
		return fmt.Errorf("desired state %q of %s/%s: id, application and service are required", v.ID, v.Application, v.Service)
	}
	if _, dup := r.states[v.ID]; dup {
		return fmt.Errorf("desired state %s appears twice", v.ID)
	}
	switch {
	case v.CompiledFrom != "" && v.Compiled != nil:
		return fmt.Errorf("desired state %s has both its own compiled copy and compiledFrom %s", v.ID, v.CompiledFrom)
	case !v.PrunedAt.IsZero() && (v.Compiled != nil || v.CompiledFrom != ""):
		return fmt.Errorf("desired state %s is pruned but has a compiled copy", v.ID)
	case v.CompiledFrom != "" && !r.states[v.CompiledFrom]:
		return fmt.Errorf("desired state %s: compiledFrom %s names no desired state before it that holds its own compiled copy", v.ID, v.CompiledFrom)
	}
	r.states[v.ID] = v.Compiled != nil
	return nil
}

// increasing checks that id is positive and above *last, then sets *last.
func increasing(what string, id int64, last *int64) error {
	if id < 1 || id <= *last {
		return fmt.Errorf("%s %d after %d: they must be positive and increase", what, id, *last)
	}
	*last = id
	return nil
}
