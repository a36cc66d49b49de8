-- +goose Up
-- The dead rows of each queue, for the reads an operator or a scraper
-- makes often: the console's overview and its dead events, the dead
-- count of hookbox_events. Counted or listed from the whole queue
-- table, each read every finished row there is (a second at three
-- million rows, at each page load); from here, as many entries as there
-- are dead rows. Rows go dead rarely, so the hot path seldom writes it.
--
-- Built in the migration's transaction, as 00017's index is: writes to
-- the queue wait while it reads the table (a fraction of a second per
-- million rows). CREATE INDEX CONCURRENTLY would hold no write back, but
-- a concurrent build of a partial index waits for every transaction of
-- the whole database that began before it, other concurrent builds
-- among them: two schemas of one database migrating at once could each
-- wait for the other until one failed with "deadlock detected".
CREATE INDEX queue_dead ON queue (source, id) INCLUDE (fanout) WHERE status = 'dead';

-- +goose Down
DROP INDEX queue_dead;
