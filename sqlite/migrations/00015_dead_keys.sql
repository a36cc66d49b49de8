-- +goose Up
-- The dead deliveries with an order key (hookbox_target_keys_held): a dead
-- one holds its key while it is the key's first delivery (on_dead: hold).
-- Counting held keys from events_order read every distinct key of a queue
-- and the status of its first delivery, at each metrics scrape. Deliveries
-- go dead rarely, so the hot path never writes here.
-- A key of a delivery's own (routing.NoKeyPrefix: one without its
-- target's order_by value, or one skipped) is no other delivery's, so it
-- holds nothing: those are left out, and skipped deliveries, which stay
-- dead until purged, do not grow the count's work. The keys left out are
-- those from '(none):' up to '(none);' (the next character after ':'),
-- by comparisons: with a function in the predicate (GLOB) every update of
-- a row's status read the whole row, its payload too, to judge it
-- (TestLargePayloadsNotCopiedByClaimAndFinish).
CREATE INDEX events_dead_keys ON events (source, order_key, id)
    WHERE order_key IS NOT NULL AND status = 'dead' AND (order_key < '(none):' OR order_key >= '(none);');

-- +goose Down
DROP INDEX events_dead_keys;
