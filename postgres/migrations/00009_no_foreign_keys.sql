-- +goose Up
-- The queue's rows no longer point at their event through foreign keys:
-- attempts.event_id and events.parent_id are plain columns. On PostgreSQL a
-- foreign key costs a trigger per row at both ends: every attempt recorded
-- locked its event (FOR KEY SHARE) to check that it was there, and every
-- event purged ran two more statements to cascade. The code keeps what the
-- keys kept: an attempt is written only by the transition that holds the
-- event's lease (so its event exists), and a purge deletes an event's
-- deliveries and attempts in the transaction that deletes it (see purgeBatch).
ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_event_id_fkey;
ALTER TABLE events DROP CONSTRAINT IF EXISTS events_parent_id_fkey;

-- +goose Down
DELETE FROM attempts a WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = a.event_id);
DELETE FROM events c WHERE c.parent_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM events e WHERE e.id = c.parent_id);
ALTER TABLE events ADD CONSTRAINT events_parent_id_fkey FOREIGN KEY (parent_id) REFERENCES events (id) ON DELETE CASCADE;
ALTER TABLE attempts ADD CONSTRAINT attempts_event_id_fkey FOREIGN KEY (event_id) REFERENCES events (id) ON DELETE CASCADE;
