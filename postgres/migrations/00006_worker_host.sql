-- +goose Up
-- Where each worker pool runs, so a pool that starts on the same machine
-- can tell at once that another's process is gone (its pid is not running,
-- or is the new pool's own after a container restart) rather than waiting
-- for the record to go stale.
ALTER TABLE workers ADD COLUMN host text NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN pid integer NOT NULL DEFAULT 0;

-- One row per claiming loop of a pool that runs Go handlers: the events it
-- is running in a transaction that picked them without a lease (see
-- hookbox.Mark), written and committed before the handlers run, emptied by
-- the commit that finishes them. The marks of a pool with no record left
-- name the events that were in flight when its process died.
CREATE TABLE work_marks (
    key      text     PRIMARY KEY,
    worker   text     NOT NULL,
    ids      bigint[] NOT NULL,
    attempts integer[] NOT NULL
);

-- +goose Down
DROP TABLE work_marks;
ALTER TABLE workers DROP COLUMN pid;
ALTER TABLE workers DROP COLUMN host;
