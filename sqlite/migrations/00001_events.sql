-- +goose Up
-- events is both the dedupe memory and the work queue. Times are unix
-- milliseconds. next_attempt_at is when the row is next due: for a pending row
-- the time of its next attempt, for a processing row the end of its lease.
CREATE TABLE events (
    id              INTEGER PRIMARY KEY,
    source          TEXT    NOT NULL,
    delivery_id     TEXT    NOT NULL,
    id_is_hash      INTEGER NOT NULL DEFAULT 0,
    event_type      TEXT    NOT NULL DEFAULT '',
    headers         BLOB    NOT NULL DEFAULT '{}',
    payload         BLOB,
    status          TEXT    NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'processing', 'done', 'dead')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    lease_owner     TEXT,
    last_error      TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    UNIQUE (source, delivery_id)
);

-- The hot index: only unfinished rows, by source in due order, so a claim
-- reads just the rows it takes however many finished rows the table holds.
CREATE INDEX events_due ON events (source, next_attempt_at, id)
    WHERE status IN ('pending', 'processing');

-- Finished rows by age, for retention. Kept off the ingest path: a row
-- enters this index when it finishes, not when it arrives.
CREATE INDEX events_finished ON events (updated_at)
    WHERE status IN ('done', 'dead');

-- +goose Down
DROP TABLE events;
