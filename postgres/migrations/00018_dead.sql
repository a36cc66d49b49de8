-- +goose NO TRANSACTION
-- +goose Up
-- The dead rows of each queue, for the reads an operator or a scraper
-- makes often: the console's overview and its dead events, the dead
-- count of hookbox_events. Counted or listed from the whole queue
-- table, each read every finished row there is (a second at three
-- million rows, at each page load); from here, as many entries as there
-- are dead rows. Rows go dead rarely, so the hot path seldom writes it.
--
-- Built CONCURRENTLY, outside a transaction: a plain CREATE INDEX holds
-- off every ingest and finish of the queue while it reads the whole
-- table (seconds at ten million rows), which a rolling upgrade, whose
-- older instances go on working while this runs, would answer with
-- 503s. A build that failed half-way leaves an invalid index of this
-- name behind, and goose no record of the migration: it is dropped
-- first, so that the migration run again builds it whole.
DROP INDEX CONCURRENTLY IF EXISTS queue_dead;
CREATE INDEX CONCURRENTLY queue_dead ON queue (source, id) INCLUDE (fanout) WHERE status = 'dead';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS queue_dead;
