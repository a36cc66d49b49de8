-- +goose Up
-- The operator console's live sessions (package ui): the SHA-256 of each
-- login's random id, and when it ends by itself (expires_at, unix
-- milliseconds). A session cookie is admitted only while its row is here;
-- logging out deletes the row. Every login forgets a few expired rows.
CREATE TABLE sessions (
    id_sha256  BLOB    NOT NULL PRIMARY KEY,
    expires_at INTEGER NOT NULL
);

-- Finding expired rows to forget.
CREATE INDEX sessions_expires ON sessions (expires_at);

-- +goose Down
DROP TABLE sessions;
