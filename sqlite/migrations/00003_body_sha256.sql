-- +goose Up
-- The SHA-256 of the body, for sources whose signature covers the body but
-- not the delivery id (github, hmac, none): a captured body and signature
-- sent again under a fresh id is a duplicate of the first event. NULL for
-- every other source and for rows stored before this migration; NULLs
-- never conflict, and the partial index holds only the rows that set it.
ALTER TABLE events ADD COLUMN body_sha256 BLOB;
CREATE UNIQUE INDEX events_body ON events (source, body_sha256)
    WHERE body_sha256 IS NOT NULL;

-- +goose Down
DROP INDEX events_body;
ALTER TABLE events DROP COLUMN body_sha256;
