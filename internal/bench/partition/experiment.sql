-- The PostgreSQL retention experiment of issue #18 (BENCHMARKS.md,
-- "Time partitions for PostgreSQL retention"): what ingest and retention
-- cost with hookbox's events table of the time, against events
-- partitioned by day with the dedupe memory in a narrow table of its own
-- (schema pe_part, made here).
--
-- Valid for hookbox's PostgreSQL schema 7 to 9 only: it inserts into and
-- deletes from events as a table, which migration 00010 made a view over
-- event_data and queue. Schema pe_flat must exist first, migrated by a
-- hookbox built from before that migration (the parent of commit 0b07e95,
-- which stops at version 9). With $PG a URL that has a ?query already:
--
--   mkdir /tmp/hookbox9 && git archive 0b07e95^ | tar -x -C /tmp/hookbox9
--   (cd /tmp/hookbox9 && go build -o hookbox ./cmd/hookbox)
--   psql "$PG" -c 'CREATE SCHEMA pe_flat'
--   /tmp/hookbox9/hookbox migrate --db "$PG&search_path=pe_flat"
--   psql -v ON_ERROR_STOP=1 -f internal/bench/partition/experiment.sql "$PG"
--
-- The server-side loops measure PostgreSQL's own work (no round trips,
-- no HTTP): 64-row batches as group commit sends them, 1 KiB payloads.
\set ON_ERROR_STOP on
\timing on
SET client_min_messages = warning;

-- Stop before anything is made unless pe_flat holds events as a table.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = 'pe_flat' AND tablename = 'events') THEN
    RAISE EXCEPTION 'pe_flat.events is not a table: create schema pe_flat and migrate it with a hookbox from before migration 00010 (see the comment at the top)';
  END IF;
END $$;

-- The partitioned layout: dedupe (source, delivery_id) → event; events by
-- created_at, one partition a day, the queue index per partition.
DROP SCHEMA IF EXISTS pe_part CASCADE;
CREATE SCHEMA pe_part;
SET search_path = pe_part;
CREATE TABLE dedupe (
    source      text        NOT NULL,
    delivery_id text        NOT NULL,
    event_id    bigint      NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (source, delivery_id)
);
CREATE INDEX dedupe_created ON dedupe (created_at);
CREATE SEQUENCE events_id_seq;
CREATE TABLE events (
    id              bigint      NOT NULL DEFAULT nextval('events_id_seq'),
    source          text        NOT NULL,
    delivery_id     text        NOT NULL,
    event_type      text        NOT NULL DEFAULT '',
    headers         jsonb       NOT NULL DEFAULT '{}',
    payload         bytea,
    status          text        NOT NULL DEFAULT 'pending',
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);
CREATE INDEX events_due ON events (source, next_attempt_at, id) WHERE status IN ('pending', 'processing');
CREATE TABLE events_old PARTITION OF events FOR VALUES FROM ('2000-01-01') TO ('2026-01-01');
CREATE TABLE events_now PARTITION OF events FOR VALUES FROM ('2026-01-01') TO ('2100-01-01');

-- Ingest, flat: hookbox's statement shape (INSERT … ON CONFLICT DO
-- NOTHING RETURNING) into the events table of schema pe_flat.
SET search_path = pe_flat;
DO $$
DECLARE b int; p bytea := convert_to(repeat('x', 1024), 'UTF8');
BEGIN
  FOR b IN 0..1562 LOOP
    INSERT INTO events (source, delivery_id, headers, payload, next_attempt_at, created_at, updated_at)
    SELECT 'bench', 'f_' || (b * 64 + i), '{"Webhook-Id":["x"],"Webhook-Signature":["v1,abc"]}', p, now(), now(), now()
    FROM generate_series(1, 64) i ON CONFLICT DO NOTHING;
  END LOOP;
END $$;

-- Ingest, partitioned: the dedupe row first, the event only for the ids
-- it took, in one statement.
SET search_path = pe_part;
DO $$
DECLARE b int; p bytea := convert_to(repeat('x', 1024), 'UTF8');
BEGIN
  FOR b IN 0..1562 LOOP
    WITH d AS (
      INSERT INTO dedupe (source, delivery_id, event_id, created_at)
      SELECT 'bench', 'f_' || (b * 64 + i), nextval('events_id_seq'), now() FROM generate_series(1, 64) i
      ON CONFLICT DO NOTHING RETURNING source, delivery_id, event_id, created_at)
    INSERT INTO events (id, source, delivery_id, headers, payload, next_attempt_at, created_at, updated_at)
    SELECT event_id, source, delivery_id, '{"Webhook-Id":["x"],"Webhook-Signature":["v1,abc"]}', p, now(), created_at, now() FROM d;
  END LOOP;
END $$;

-- Retention: 1M finished rows of a past period in each layout.
SET search_path = pe_flat;
INSERT INTO events (source, delivery_id, payload, status, attempts, next_attempt_at, created_at, updated_at)
SELECT 'old', 'o_' || i, convert_to(repeat('x', 1024), 'UTF8'), 'done', 1, '2025-06-01', '2025-06-01', '2025-06-01'
FROM generate_series(1, 1000000) i;
SET search_path = pe_part;
WITH d AS (
  INSERT INTO dedupe (source, delivery_id, event_id, created_at)
  SELECT 'old', 'o_' || i, nextval('events_id_seq'), '2025-06-01' FROM generate_series(1, 1000000) i
  RETURNING source, delivery_id, event_id, created_at)
INSERT INTO events (id, source, delivery_id, payload, status, attempts, next_attempt_at, created_at, updated_at)
SELECT event_id, source, delivery_id, convert_to(repeat('x', 1024), 'UTF8'), 'done', 1, created_at, created_at, created_at FROM d;
ANALYZE pe_flat.events;
ANALYZE pe_part.events;
ANALYZE pe_part.dedupe;
CHECKPOINT;

-- Flat: hookbox's purge, 1000-row batches over id slices (the statement
-- postgres.Store.Purge runs, without its pauses).
SET search_path = pe_flat;
DO $$
DECLARE lo bigint; hi bigint; a bigint;
BEGIN
  SELECT min(id), max(id) INTO lo, hi FROM events;
  a := lo - 1;
  WHILE a < hi LOOP
    DELETE FROM events WHERE id > a AND id <= a + 1000 AND CASE WHEN status IN ('done') AND updated_at < '2026-01-01'
      AND parent_id IS NULL AND NOT (fanout AND EXISTS (SELECT 1 FROM events c WHERE c.parent_id = events.id)) THEN true ELSE false END;
    a := a + 1000;
  END LOOP;
END $$;

-- Partitioned: drop the old partition, then forget its delivery ids
-- (the dedupe memory still needs a DELETE, on a narrow table).
SET search_path = pe_part;
ALTER TABLE events DETACH PARTITION events_old;
DROP TABLE events_old;
DO $$
DECLARE n int;
BEGIN
  LOOP
    DELETE FROM dedupe WHERE ctid = ANY (ARRAY(SELECT ctid FROM dedupe WHERE created_at < '2026-01-01' LIMIT 1000));
    GET DIAGNOSTICS n = ROW_COUNT;
    EXIT WHEN n = 0;
  END LOOP;
END $$;

SELECT 'flat events', pg_size_pretty(pg_total_relation_size('pe_flat.events'))
UNION ALL SELECT 'partitioned events', pg_size_pretty(pg_total_relation_size('pe_part.events_now'))
UNION ALL SELECT 'dedupe', pg_size_pretty(pg_total_relation_size('pe_part.dedupe'));
