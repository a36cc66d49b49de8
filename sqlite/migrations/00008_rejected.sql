-- +goose Up
-- The log of refused deliveries (400, 401, 404, 413) for the operator, bounded
-- by count and age: every write trims it in the same transaction. Times are
-- unix milliseconds. headers keep signature values so that a re-check can
-- verify a delivery again; they are masked wherever a row is shown. body holds
-- the first bytes of the body; body_complete says it is all of it.
--
-- Numbered 00008: 00007 is taken by a change to events made at the same time.
-- The stores run goose with out-of-order migrations allowed, so a database
-- that has 00008 applies 00007 when it arrives.
CREATE TABLE rejected_deliveries (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    source            TEXT    NOT NULL,
    unknown_source    INTEGER NOT NULL DEFAULT 0,
    received_at       INTEGER NOT NULL,
    remote_addr       TEXT    NOT NULL DEFAULT '',
    status            INTEGER NOT NULL,
    reason            TEXT    NOT NULL DEFAULT '',
    headers           BLOB    NOT NULL DEFAULT '{}',
    body_size         INTEGER NOT NULL DEFAULT -1,
    body              BLOB,
    body_complete     INTEGER NOT NULL DEFAULT 0,
    admitted_event_id INTEGER
);

-- Trimming by age and listing by time.
CREATE INDEX rejected_deliveries_received ON rejected_deliveries (received_at);

-- +goose Down
DROP TABLE rejected_deliveries;
