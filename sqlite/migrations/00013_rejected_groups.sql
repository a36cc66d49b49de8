-- +goose Up
-- The rejected-deliveries log is trimmed to its count bound group by group
-- (each configured source; every unknown name together), the oldest rows of
-- the largest group first, so that one noisy sender gives up its own rows
-- rather than evicting another source's. These indexes count the groups
-- and find each one's oldest rows without reading the table: the rowid
-- ends each entry, so rows of one group are in id order.
CREATE INDEX rejected_deliveries_group ON rejected_deliveries (unknown_source, source);
CREATE INDEX rejected_deliveries_unknown ON rejected_deliveries (unknown_source);

-- +goose Down
DROP INDEX rejected_deliveries_unknown;
DROP INDEX rejected_deliveries_group;
