-- +goose Up
-- One row per running worker pool. A pool adds its row when it starts and
-- deletes it when it stops cleanly, and refreshes seen_at while it runs; a
-- row left behind, or gone stale, is the trace of a process that died. A
-- pool that finds one starts in recovery (see worker.Pool.Start).
CREATE TABLE workers (
    name       text        PRIMARY KEY,
    started_at timestamptz NOT NULL DEFAULT now(),
    seen_at    timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE workers;
