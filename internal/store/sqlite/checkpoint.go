package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// Checkpoints: SQLite copies the WAL's pages back into the database file
// (a checkpoint) so that the WAL can start over. By default the connection
// whose commit makes the WAL long enough does it, inside that commit: here
// the single write connection, which every write of the process waits for.
// Under load that put a tenth of the writer's time on the one path nothing
// else can share.
//
// So a checkpointer of its own does it beside the writer, on a connection
// of its own: the leader of a group commit nudges it every
// checkpointEvery commits, and it runs a PASSIVE checkpoint, which copies
// what no reader still needs and never waits for, nor blocks, the writer or
// the readers. The writer keeps SQLite's automatic checkpoint, at
// backstopCheckpointPages, for when the checkpointer falls behind (a
// reader holding an old snapshot for long).

const (
	// checkpointEvery is how many commits pass between the checkpointer's
	// runs: a commit of the engine's writes a few dozen pages, so a run
	// copies a few thousand (as SQLite's default of 1,000 pages, give or
	// take, but without holding up a commit).
	checkpointEvery = 128
	// backstopCheckpointPages is the write connection's own automatic
	// checkpoint: the WAL length (in pages) at which a commit checkpoints.
	backstopCheckpointPages = 40000
)

// checkpointer runs passive checkpoints on db when nudged.
type checkpointer struct {
	db      *sql.DB
	commits int // counted by the group leader, under the group's lock
	nudge   chan struct{}
	stop    context.CancelFunc
	done    sync.WaitGroup
}

// startCheckpointer opens the checkpointer's connection with dsn and starts it.
func startCheckpointer(dsn string) (*checkpointer, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	oneConnection(db)
	ctx, stop := context.WithCancel(context.Background())
	c := &checkpointer{db: db, nudge: make(chan struct{}, 1), stop: stop}
	c.done.Go(func() { c.run(ctx) })
	return c, nil
}

// committed counts a commit and nudges the checkpointer every
// checkpointEvery; called by the group leader, one at a time.
func (c *checkpointer) committed() {
	if c == nil {
		return
	}
	c.commits++
	if c.commits%checkpointEvery != 0 {
		return
	}
	select {
	case c.nudge <- struct{}{}:
	default: // a run is due already
	}
}

func (c *checkpointer) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.nudge:
		}
		// A failed checkpoint is left for the next one (or the writer's
		// own): it loses nothing, the pages stay in the WAL.
		_, _ = c.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
	}
}

// close stops the checkpointer and closes its connection.
func (c *checkpointer) close() error {
	if c == nil {
		return nil
	}
	c.stop()
	c.done.Wait()
	return c.db.Close()
}
