-- +goose Up
-- One row per running worker pool. A pool adds its row when it starts and
-- deletes it when it stops cleanly, and refreshes seen_at while it runs; a
-- row left behind, or gone stale, is the trace of a process that died. A
-- pool that finds one starts in recovery (see worker.Pool.Start). Times are
-- unix milliseconds.
CREATE TABLE workers (
    name       TEXT    PRIMARY KEY,
    started_at INTEGER NOT NULL,
    seen_at    INTEGER NOT NULL
) WITHOUT ROWID;

-- +goose Down
DROP TABLE workers;
