-- +goose Up
-- The order keys held by a delivery that runs now. A claim by key skips a
-- key while any of its deliveries is leased (status processing, lease not
-- over), whatever its id: a delivery replayed after a later one of its key
-- started, or one committed by another ingest transaction (another process,
-- or ingest.flushers) after a later id was already claimed, heads its key
-- by id and must still wait. Only running deliveries with a key are here,
-- so the index stays as small as the work in flight.
CREATE INDEX queue_leased_keys ON queue (source, (order_key COLLATE "C"))
    WHERE order_key IS NOT NULL AND status = 'processing';

-- +goose Down
DROP INDEX queue_leased_keys;
