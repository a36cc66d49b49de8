-- +goose Up
-- events is both the dedupe memory and the work queue. next_attempt_at is when
-- the row is next due: for a pending row the time of its next attempt, for a
-- processing row the end of its lease.
CREATE TABLE events (
    id              bigserial   PRIMARY KEY,
    source          text        NOT NULL,
    delivery_id     text        NOT NULL,
    id_is_hash      boolean     NOT NULL DEFAULT false,
    event_type      text        NOT NULL DEFAULT '',
    headers         jsonb       NOT NULL DEFAULT '{}',
    payload         bytea,
    status          text        NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'processing', 'done', 'dead')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_owner     text,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
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
