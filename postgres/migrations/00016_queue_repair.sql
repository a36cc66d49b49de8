-- +goose Up
-- Every event has a queue row (00010). 00010 once copied the queue state
-- without locking the events table first, so a row an older instance
-- committed during the copy (a rolling upgrade migrates while they run)
-- stayed in event_data without one: acknowledged to its sender, never
-- worked, missing from the events view. Each such row gets its queue row
-- now. A row with deliveries (rows whose parent_id is its id) is a FanOut
-- event, done as ingest makes it. So is a row with none of a source whose
-- other events are all FanOut ones: a store_only source's event, or one
-- no target's filter matched, which ingest stores done with no
-- deliveries (it reads "stored"); made pending, it would wait in a queue
-- nothing claims, for ever. Any other row is pending, due now, never
-- attempted, in the queue of its source (a delivery's source is its
-- queue's name). All, not any: a source that was store_only and now
-- forwards has FanOut rows from before, and an orphan of it marked done
-- would never be delivered; when in doubt an orphan is pending (worked
-- once more at worst, never lost). So is one of a source whose only
-- events are orphans. Still wrong: an orphan among the first events a
-- source forwarded after being store_only (all its other events FanOut)
-- is taken for a stored one. An order key the older instance gave a
-- delivery was in a column the copy dropped, and is lost.
WITH orphans AS MATERIALIZED (
    SELECT d.id, d.source FROM event_data d
    WHERE NOT EXISTS (SELECT 1 FROM queue q WHERE q.id = d.id)),
stored_only AS (
    SELECT q.source FROM queue q
    WHERE q.source IN (SELECT source FROM orphans)
    GROUP BY q.source HAVING bool_and(q.fanout))
INSERT INTO queue (id, source, status, attempts, next_attempt_at, updated_at, fanout)
SELECT o.id, o.source, CASE WHEN k.fanout THEN 'done' ELSE 'pending' END, 0, now(), now(), k.fanout
FROM orphans o
CROSS JOIN LATERAL (SELECT EXISTS (SELECT 1 FROM event_data c
        WHERE c.parent_id IS NOT NULL AND c.parent_id = o.id)
    OR o.source IN (SELECT source FROM stored_only) AS fanout) k
ORDER BY o.id
ON CONFLICT (id) DO NOTHING;

-- +goose Down
-- The queue rows stay: they are the events' own, as ingest writes them.
SELECT 1;
