-- +goose Up
-- The dead deliveries with an order key (hookbox_target_keys_held): a dead
-- one holds its key while it is the key's first delivery (on_dead: hold).
-- Counting held keys from queue_order read every distinct key of a queue
-- and the status of its first delivery: seconds at 100,000 keys, at each
-- metrics scrape. Deliveries go dead rarely, so the hot path never writes
-- here.
CREATE INDEX queue_dead_keys ON queue (source, (order_key COLLATE "C"), id)
    WHERE order_key IS NOT NULL AND status = 'dead';

-- +goose Down
DROP INDEX queue_dead_keys;
