-- +goose Up
-- attempt_base is the attempt count an event had when it was last replayed.
-- A replay no longer resets attempts (attempt numbers never repeat in an
-- event's history); its retry budget counts from here instead.
ALTER TABLE events ADD COLUMN attempt_base INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE events DROP COLUMN attempt_base;
