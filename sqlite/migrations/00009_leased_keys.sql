-- +goose Up
-- The order keys held by a delivery that runs now. A claim by key skips a
-- key while any of its deliveries is leased (status processing, lease not
-- over), whatever its id: a delivery replayed after a later one of its key
-- started heads its key by id and must still wait. Only running deliveries
-- with a key are here, so the index stays as small as the work in flight.
CREATE INDEX events_leased_keys ON events (source, order_key)
    WHERE order_key IS NOT NULL AND status = 'processing';

-- +goose Down
DROP INDEX events_leased_keys;
