-- +goose Up
-- What Stats counts without reading the table, whose rows carry their
-- payloads: at ten million events a count by status read every page of
-- the file, on every metrics scrape. With these, the done events are the
-- rest of a count over the (source, delivery_id) index. Neither is
-- written by the hot path: events go dead rarely, and only events with
-- several targets are fan-out records.
CREATE INDEX events_dead ON events (id) WHERE status = 'dead';
CREATE INDEX events_fanout ON events (id) WHERE fanout;

-- +goose Down
DROP INDEX events_fanout;
DROP INDEX events_dead;
