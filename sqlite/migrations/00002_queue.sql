-- +goose Up
-- One row per attempt at an event, so a person can see why it failed.
CREATE TABLE attempts (
    id          INTEGER PRIMARY KEY,
    event_id    INTEGER NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,
    owner       TEXT    NOT NULL,
    outcome     TEXT    NOT NULL, -- done, retry, dead, or lost (refused: the lease had moved on)
    error       TEXT,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER NOT NULL
);
CREATE INDEX attempts_event ON attempts (event_id, attempt);

-- Business keys claimed by handlers (effect.ClaimKey): the durable memory
-- that an effect was applied, kept as long as the business record.
CREATE TABLE effect_keys (
    scope      TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    event_id   INTEGER,
    created_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    PRIMARY KEY (scope, key)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE effect_keys;
DROP TABLE attempts;
