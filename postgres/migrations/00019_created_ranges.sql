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
CREATE INDEX event_data_created ON event_data USING brin (created_at) WITH (autosummarize = on);

-- +goose Down
DROP INDEX event_data_created;
