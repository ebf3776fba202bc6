-- 0003: retention of superseded desired states (see retention.go).
--
-- pruned_at is set when retention dropped the compiled copy of a superseded
-- desired state (compiled is then NULL); the row, its approvals and events
-- stay. compiled_from names the desired state whose compiled copy this one
-- shares (a push identical to the active desired state stores no second
-- copy); compiled is then NULL. It always names a row that has its own copy.
ALTER TABLE desired_states ADD COLUMN compiled_from TEXT;
ALTER TABLE desired_states ADD COLUMN pruned_at TEXT;
CREATE INDEX desired_states_compiled_from ON desired_states (compiled_from) WHERE compiled_from IS NOT NULL;
