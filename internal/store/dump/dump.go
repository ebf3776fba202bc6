package dump

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Exporter is a store that can be dumped.
type Exporter interface {
	// Export calls emit with every record of the store, in the order of
	// Kinds (and within a kind in the order the package documentation
	// gives), all read in one consistent snapshot. It stops at emit's first
	// error and returns it. Processes and sessions are not exported.
	Export(ctx context.Context, emit func(Record) error) error
}

// Importer is a store that can be loaded from a dump.
type Importer interface {
	// Import loads the records next returns, until it returns io.EOF, into
	// the store, which must be empty: a store holding any record fails with
	// an error wrapping ErrNotEmpty and nothing is written. Everything is
	// written in one transaction: any error writes nothing. Errors name the
	// record that failed; next's are returned as they are. Records keep their ids, sequence numbers,
	// tokens and times, and the store's sequences move past the imported
	// maximums, so that what is created afterwards continues after them.
	// Process records are skipped. The store's sessions (not records of a
	// dump) are deleted, in the same transaction.
	Import(ctx context.Context, next func() (Record, error)) error
}

// ErrNotEmpty is wrapped by the error of an import into a store that holds
// records already.
var ErrNotEmpty = errors.New("the target store is not empty")

// NotEmptyError is the error of an import into a store that holds the
// records counted in held: it wraps ErrNotEmpty and says what the store
// holds.
func NotEmptyError(held Counts) error {
	return fmt.Errorf("%w: it holds %s; import into a new data directory or an empty database", ErrNotEmpty, held)
}

// Counts counts records by kind.
type Counts map[Kind]int

// Total is the number of records counted.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// String lists the counts of the kinds counted, in the order of Kinds:
// "12 configs, 340 events" ("no records" when there are none).
func (c Counts) String() string {
	var parts []string
	for _, k := range Kinds {
		if n := c[k]; n != 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k.plural()))
		}
	}
	if len(parts) == 0 {
		return "no records"
	}
	return strings.Join(parts, ", ")
}

// Write dumps src into w: the header h (Format and Version are set, and a
// zero ExportedAt becomes the current time), every record src exports, and
// the end line. It returns the records written by kind. On error, what was
// written lacks its end line, so no reader takes it for a whole dump.
func Write(ctx context.Context, w io.Writer, src Exporter, h Header) (Counts, error) {
	dw, err := NewWriter(w, h)
	if err != nil {
		return nil, err
	}
	if err := src.Export(ctx, dw.Write); err != nil {
		return dw.Counts(), err
	}
	if err := dw.Close(); err != nil {
		return dw.Counts(), err
	}
	return dw.Counts(), nil
}

// Read loads the dump r holds into dst and returns its header and the
// records read by kind (those dst skipped, processes, included). A dump
// that is not whole and well formed fails, naming the line, and dst writes
// nothing.
func Read(ctx context.Context, r io.Reader, dst Importer) (Header, Counts, error) {
	dr, err := NewReader(r)
	if err != nil {
		return Header{}, nil, err
	}
	if err := dst.Import(ctx, dr.Next); err != nil {
		return dr.Header(), dr.Counts(), err
	}
	if !dr.done {
		// An importer stops at io.EOF: one that stopped before is broken.
		return dr.Header(), dr.Counts(), fmt.Errorf("import: stopped before the end of the dump (line %d)", dr.line)
	}
	return dr.Header(), dr.Counts(), nil
}
