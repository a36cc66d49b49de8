-- +goose Up
-- The one-time values senders sign where their signatures do not cover the
-- body (Mailgun's token), each with the SHA-256 of the body it came with,
-- kept until the signature's timestamp leaves the tolerance (expires_at,
-- unix milliseconds). The same value with another body before then is a
-- replay, and refused. Every use forgets a few expired rows.
CREATE TABLE nonces (
    source      TEXT    NOT NULL,
    nonce       TEXT    NOT NULL,
    body_sha256 BLOB    NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (source, nonce)
);

-- Finding expired rows to forget.
CREATE INDEX nonces_expires ON nonces (expires_at);

-- +goose Down
DROP TABLE nonces;
