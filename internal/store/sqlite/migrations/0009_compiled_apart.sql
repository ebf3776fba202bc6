-- 0009: compiled desired states move to a table of their own.
--
-- A compiled desired state is often larger than a page, so it lived in
-- overflow pages in the middle of its desired_states row: reading any later
-- column (params, created_at, replaced_by, pruned_at), as every engine pass
-- does for the active desired state, walked the overflow chain. The rows of
-- desired_states are now small; the copy is read only when asked for.
-- A row that shares another's copy (compiled_from) has no row here, and
-- retention deletes the rows it prunes.
CREATE TABLE desired_state_compiled (
	id       TEXT PRIMARY KEY REFERENCES desired_states (id),
	compiled BLOB NOT NULL
);
INSERT INTO desired_state_compiled (id, compiled)
	SELECT id, compiled FROM desired_states WHERE compiled IS NOT NULL ORDER BY ord;
ALTER TABLE desired_states DROP COLUMN compiled;
