-- +goose Up
-- The dead deliveries with an order key (hookbox_target_keys_held): a dead
-- one holds its key while it is the key's first delivery (on_dead: hold).
-- Counting held keys from events_order read every distinct key of a queue
-- and the status of its first delivery, at each metrics scrape. Deliveries
-- go dead rarely, so the hot path never writes here.
CREATE INDEX events_dead_keys ON events (source, order_key, id)
    WHERE order_key IS NOT NULL AND status = 'dead';

-- +goose Down
DROP INDEX events_dead_keys;
