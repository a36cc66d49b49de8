-- +goose Up
-- The one-time values senders sign where their signatures do not cover the
-- body (Mailgun's token), as SHA-256 hashes, each with the SHA-256 of the
-- body it came with, the source that first saw it, and the timestamp its
-- signature covers. A value is one nonce at every source. The same value
-- with another body is a replay, and refused. Rows are kept for longer
-- than any tolerance a scheme with nonces accepts (hookbox.NonceKeep);
-- every use forgets a few older ones.
CREATE TABLE nonces (
    nonce_sha256 bytea       NOT NULL PRIMARY KEY,
    body_sha256  bytea       NOT NULL,
    source       text        NOT NULL,
    signed_at    timestamptz NOT NULL
);

-- Finding old rows to forget.
CREATE INDEX nonces_signed ON nonces (signed_at);

-- +goose Down
DROP TABLE nonces;
