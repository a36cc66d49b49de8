-- +goose Up
-- The one-time values senders sign where their signatures do not cover the
-- body (Mailgun's token), as SHA-256 hashes, each with the SHA-256 of the
-- body it came with, kept until the signature's timestamp leaves the
-- tolerance (expires_at, unix milliseconds) and a margin after that. The
-- same value with another body is a replay, and refused. Every use forgets
-- a few rows past their margin.
CREATE TABLE nonces (
    source       TEXT    NOT NULL,
    nonce_sha256 BLOB    NOT NULL,
    body_sha256  BLOB    NOT NULL,
    expires_at   INTEGER NOT NULL,
    PRIMARY KEY (source, nonce_sha256)
);

-- Finding expired rows to forget.
CREATE INDEX nonces_expires ON nonces (expires_at);

-- +goose Down
DROP TABLE nonces;
