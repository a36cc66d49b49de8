-- +goose Up
-- Where each worker pool runs, so a pool that starts on the same machine
-- can tell at once that another's process is gone (its pid is not running,
-- or is the new pool's own after a container restart) rather than waiting
-- for the record to go stale. On SQLite the marks of pools that run
-- handlers (hookbox.Mark) are files next to the database, not rows: they
-- are written while a work transaction holds the only write lock.
ALTER TABLE workers ADD COLUMN host TEXT NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN pid INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE workers DROP COLUMN pid;
ALTER TABLE workers DROP COLUMN host;
