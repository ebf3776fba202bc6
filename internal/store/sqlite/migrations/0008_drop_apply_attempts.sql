-- 0008: -- Apply attempts were recorded beside durable tasks (0006), which now carry
-- the same facts: a task is claimed before its apply runs and completed (or
-- released) after it, and the events tell each attempt's story. The table
-- and its indexes go.
DROP TABLE apply_attempts;
