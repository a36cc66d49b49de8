-- The narrow queue table experiment of issue #18 (BENCHMARKS.md, "A narrow
-- queue table for PostgreSQL, measured inside PostgreSQL"): what ingest and
-- a drain cost PostgreSQL with hookbox's events table as it is (schema
-- nq_wide: the columns and indexes `hookbox migrate` makes), against the
-- queue state in a narrow table of its own (schema nq_narrow: events keeps
-- what never changes after ingest, queue holds status, attempts, lease and
-- due time, with the due and finished indexes).
--
--   psql -v ON_ERROR_STOP=1 -f experiment.sql postgres://…/test
--
-- The server-side loops measure PostgreSQL's own work (no round trips, no
-- HTTP): ingest in 64-row statements as group commit sends them, 1 KiB
-- payloads; the drain in 256-event transactions as the worker claims them
-- (pick with FOR UPDATE SKIP LOCKED reading the payloads, then mark done),
-- with synchronous_commit off as hookbox's work transactions run.
\timing on
SET client_min_messages = warning;

DROP SCHEMA IF EXISTS nq_wide CASCADE;
CREATE SCHEMA nq_wide;
CREATE TABLE nq_wide.events (
    id              bigserial   PRIMARY KEY,
    source          text        NOT NULL,
    delivery_id     text        NOT NULL,
    id_is_hash      boolean     NOT NULL DEFAULT false,
    event_type      text        NOT NULL DEFAULT '',
    headers         jsonb       NOT NULL DEFAULT '{}',
    payload         bytea,
    status          text        NOT NULL DEFAULT 'pending',
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_owner     text,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    body_sha256     bytea,
    attempt_base    integer     NOT NULL DEFAULT 0,
    parent_id       bigint,
    fanout          boolean     NOT NULL DEFAULT false,
    order_key       text,
    UNIQUE (source, delivery_id)
);
CREATE UNIQUE INDEX ON nq_wide.events (source, body_sha256) WHERE body_sha256 IS NOT NULL;
CREATE INDEX ON nq_wide.events (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX ON nq_wide.events (source, next_attempt_at, id) WHERE status IN ('pending', 'processing');
CREATE INDEX ON nq_wide.events (updated_at) WHERE status IN ('done', 'dead');
CREATE INDEX ON nq_wide.events (source, order_key COLLATE "C", id)
    WHERE order_key IS NOT NULL AND status IN ('pending', 'processing', 'dead');

DROP SCHEMA IF EXISTS nq_narrow CASCADE;
CREATE SCHEMA nq_narrow;
CREATE TABLE nq_narrow.events (
    id              bigserial   PRIMARY KEY,
    source          text        NOT NULL,
    delivery_id     text        NOT NULL,
    id_is_hash      boolean     NOT NULL DEFAULT false,
    event_type      text        NOT NULL DEFAULT '',
    headers         jsonb       NOT NULL DEFAULT '{}',
    payload         bytea,
    created_at      timestamptz NOT NULL DEFAULT now(),
    body_sha256     bytea,
    parent_id       bigint,
    fanout          boolean     NOT NULL DEFAULT false,
    UNIQUE (source, delivery_id)
);
CREATE UNIQUE INDEX ON nq_narrow.events (source, body_sha256) WHERE body_sha256 IS NOT NULL;
CREATE INDEX ON nq_narrow.events (parent_id) WHERE parent_id IS NOT NULL;
CREATE TABLE nq_narrow.queue (
    id              bigint      PRIMARY KEY,
    source          text        NOT NULL,
    status          text        NOT NULL DEFAULT 'pending',
    attempts        integer     NOT NULL DEFAULT 0,
    attempt_base    integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_owner     text,
    last_error      text,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    order_key       text
);
CREATE INDEX ON nq_narrow.queue (source, next_attempt_at, id) WHERE status IN ('pending', 'processing');
CREATE INDEX ON nq_narrow.queue (updated_at) WHERE status IN ('done', 'dead');
CREATE INDEX ON nq_narrow.queue (source, order_key COLLATE "C", id)
    WHERE order_key IS NOT NULL AND status IN ('pending', 'processing', 'dead');

-- Ingest, 200,000 rows in 64-row statements.
DO $$
DECLARE b int; n int; p bytea := convert_to(repeat('x', 1024), 'UTF8'); t timestamptz := clock_timestamp();
BEGIN
  FOR b IN 0..3124 LOOP
    WITH r AS (
      INSERT INTO nq_wide.events (source, delivery_id, event_type, headers, payload, next_attempt_at, created_at, updated_at)
      SELECT 'bench', 'd_' || (b * 64 + i), 'order.paid', '{"Webhook-Id":["msg_x"],"Webhook-Timestamp":["1700000000"],"Webhook-Signature":["v1,abc"],"Content-Type":["application/json"]}', p, now(), now(), now()
      FROM generate_series(1, 64) i ON CONFLICT DO NOTHING RETURNING id)
    SELECT count(*) INTO n FROM r;
  END LOOP;
  RAISE WARNING 'ingest, wide: % ms', round(extract(epoch FROM clock_timestamp() - t) * 1000);
END $$;
DO $$
DECLARE b int; n int; p bytea := convert_to(repeat('x', 1024), 'UTF8'); t timestamptz := clock_timestamp();
BEGIN
  FOR b IN 0..3124 LOOP
    WITH e AS (
      INSERT INTO nq_narrow.events (source, delivery_id, event_type, headers, payload, created_at)
      SELECT 'bench', 'd_' || (b * 64 + i), 'order.paid', '{"Webhook-Id":["msg_x"],"Webhook-Timestamp":["1700000000"],"Webhook-Signature":["v1,abc"],"Content-Type":["application/json"]}', p, now()
      FROM generate_series(1, 64) i ON CONFLICT DO NOTHING RETURNING id, source, created_at)
    , q AS (INSERT INTO nq_narrow.queue (id, source, next_attempt_at, updated_at)
        SELECT id, source, created_at, created_at FROM e RETURNING id)
    SELECT count(*) INTO n FROM q;
  END LOOP;
  RAISE WARNING 'ingest, narrow: % ms', round(extract(epoch FROM clock_timestamp() - t) * 1000);
END $$;
VACUUM ANALYZE nq_wide.events;
VACUUM ANALYZE nq_narrow.events;
VACUUM ANALYZE nq_narrow.queue;
CHECKPOINT;

-- Drain: 256 events a transaction, picked with their payloads, then done.
SET synchronous_commit = off;
DO $$
DECLARE ids bigint[]; bytes bigint := 0; n bigint; t timestamptz := clock_timestamp();
BEGIN
  LOOP
    SELECT array_agg(id), sum(length(payload)) INTO ids, n FROM (
      SELECT id, payload FROM nq_wide.events
      WHERE source = 'bench' AND status IN ('pending', 'processing') AND next_attempt_at <= now()
      ORDER BY next_attempt_at, id LIMIT 256 FOR NO KEY UPDATE SKIP LOCKED) p;
    EXIT WHEN ids IS NULL;
    bytes := bytes + n;
    UPDATE nq_wide.events SET status = 'done', attempts = attempts + 1, lease_owner = NULL,
        next_attempt_at = now(), last_error = NULL, updated_at = now()
    WHERE id = ANY (ids);
    COMMIT;
  END LOOP;
  RAISE WARNING 'drain, wide: % ms (% MB of payloads read)', round(extract(epoch FROM clock_timestamp() - t) * 1000), bytes >> 20;
END $$;
DO $$
DECLARE ids bigint[]; bytes bigint := 0; n bigint; t timestamptz := clock_timestamp();
BEGIN
  LOOP
    SELECT array_agg(id), sum(length(payload)) INTO ids, n FROM (
      SELECT q.id, e.payload FROM nq_narrow.queue q JOIN nq_narrow.events e ON e.id = q.id
      WHERE q.source = 'bench' AND q.status IN ('pending', 'processing') AND q.next_attempt_at <= now()
      ORDER BY q.next_attempt_at, q.id LIMIT 256 FOR NO KEY UPDATE OF q SKIP LOCKED) p;
    EXIT WHEN ids IS NULL;
    bytes := bytes + n;
    UPDATE nq_narrow.queue SET status = 'done', attempts = attempts + 1, lease_owner = NULL,
        next_attempt_at = now(), last_error = NULL, updated_at = now()
    WHERE id = ANY (ids);
    COMMIT;
  END LOOP;
  RAISE WARNING 'drain, narrow: % ms (% MB of payloads read)', round(extract(epoch FROM clock_timestamp() - t) * 1000), bytes >> 20;
END $$;
RESET synchronous_commit;

SELECT 'wide events' AS relation, pg_size_pretty(pg_total_relation_size('nq_wide.events')) AS size
UNION ALL SELECT 'narrow events', pg_size_pretty(pg_total_relation_size('nq_narrow.events'))
UNION ALL SELECT 'narrow queue', pg_size_pretty(pg_total_relation_size('nq_narrow.queue'));
