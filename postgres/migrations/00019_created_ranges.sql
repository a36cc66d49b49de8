-- +goose Up
-- The range of received times (created_at) of each run of 128 pages of
-- event_data, for listings filtered by time (hookbox events list --since,
-- --until; the console's filters): with none of them near the newest
-- events, a walk down the ids read every event before answering nothing
-- (seconds at three million). Events are stored in about the order they
-- are received, so each run holds a narrow range, and a filter reads the
-- runs whose range meets it. A BRIN index is exact whatever the order (a
-- run with a wide range is read and its rows checked), only slower.
--
-- It costs ingest next to nothing: a run is summarized once it is full
-- (autosummarize, by autovacuum) or by VACUUM, and an insert into a run
-- not yet summarized writes nothing to it; runs not yet summarized are
-- always read. Space a purge frees and ingest reuses widens its run's
-- range: such runs are read by more filters, never skipped wrongly.
--
-- Built in the migration's transaction, as 00017's and 00018's indexes
-- are: ingest waits while the build reads the whole event_data heap,
-- payloads included (about 0.9 s per million events of 1 KiB, cached;
-- docs/deploy.md). An operator who wants nothing held back builds the
-- same index first, with CREATE INDEX CONCURRENTLY (docs/deploy.md gives
-- the statement): it is then kept, and this migration only records its
-- version. One such build that failed or was cancelled leaves an invalid
-- index of this name, used by no query: it is dropped and built here.
-- The schema is found by its name as stored (current_schema() cast to
-- regnamespace is read as an identifier, folded to lower case: a schema
-- named with capitals was not found).
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname = 'event_data_created'
                 AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
                 AND NOT (i.indisvalid AND i.indisready)) THEN
        DROP INDEX event_data_created;
    END IF;
END
$$;
-- +goose StatementEnd
CREATE INDEX IF NOT EXISTS event_data_created ON event_data USING brin (created_at) WITH (autosummarize = on);

-- +goose Down
DROP INDEX event_data_created;
