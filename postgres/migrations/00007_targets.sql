-- +goose Up
-- Several targets per source. An event of a source with `targets:` is stored
-- once as the sender sent it (fanout: the dedupe memory and the record an
-- operator sees, never claimed), plus one row per target its filters match:
-- a delivery, with source "<source>/<target>", the event's delivery id, a copy
-- of its headers and payload, and parent_id pointing at the event. A delivery
-- is a queue row like any other, with its own status, attempts, lease and
-- replay. An event of a store_only source is stored the same way, with no
-- delivery. Events of sources with a single forward or exec stay one row, as
-- before this migration: every existing row is its own one delivery. The
-- columns are nullable or have constant defaults, so adding them rewrites
-- nothing.
ALTER TABLE events ADD COLUMN parent_id bigint REFERENCES events (id) ON DELETE CASCADE;
ALTER TABLE events ADD COLUMN fanout boolean NOT NULL DEFAULT false;
-- order_key is the value of the target's order_by for this delivery:
-- deliveries of one target with the same key run one at a time, in id order.
ALTER TABLE events ADD COLUMN order_key text;

CREATE INDEX events_children ON events (parent_id) WHERE parent_id IS NOT NULL;

-- The deliveries that hold a key: unfinished ones, and dead ones, which hold
-- their key until replayed unless the target skips them. Keys compare in
-- byte order (COLLATE "C"), whatever the database's collation, so a claim
-- that walks them agrees with hookbox on which key comes after which.
CREATE INDEX events_order ON events (source, (order_key COLLATE "C"), id)
    WHERE order_key IS NOT NULL AND status IN ('pending', 'processing', 'dead');

-- Targets (queue sources) an operator paused: no delivery of theirs is
-- claimed until resumed; ingest goes on.
CREATE TABLE paused_targets (
    name      text        PRIMARY KEY,
    paused_at timestamptz NOT NULL DEFAULT now(),
    reason    text        NOT NULL DEFAULT ''
);

-- +goose Down
DROP TABLE paused_targets;
DROP INDEX events_order;
DROP INDEX events_children;
ALTER TABLE events DROP COLUMN order_key;
ALTER TABLE events DROP COLUMN fanout;
ALTER TABLE events DROP COLUMN parent_id;
