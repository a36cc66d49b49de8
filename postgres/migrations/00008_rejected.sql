-- +goose Up
-- The log of refused deliveries (400, 401, 404, 413) for the operator, bounded
-- by count and age: every write trims it in the same transaction. headers keep
-- signature values so that a re-check can verify a delivery again; they are
-- masked wherever a row is shown. body holds the first bytes of the body;
-- body_complete says it is all of it.
--
-- Numbered 00008: 00007 is taken by a change to events made at the same time.
-- The stores run goose with out-of-order migrations allowed, so a database
-- that has 00008 applies 00007 when it arrives.
CREATE TABLE rejected_deliveries (
    id                bigserial   PRIMARY KEY,
    source            text        NOT NULL,
    unknown_source    boolean     NOT NULL DEFAULT false,
    received_at       timestamptz NOT NULL,
    remote_addr       text        NOT NULL DEFAULT '',
    status            integer     NOT NULL,
    reason            text        NOT NULL DEFAULT '',
    headers           jsonb       NOT NULL DEFAULT '{}',
    body_size         bigint      NOT NULL DEFAULT -1,
    body              bytea,
    body_complete     boolean     NOT NULL DEFAULT false,
    admitted_event_id bigint
);

-- Trimming by age and listing by time.
CREATE INDEX rejected_deliveries_received ON rejected_deliveries (received_at);

-- +goose Down
DROP TABLE rejected_deliveries;
