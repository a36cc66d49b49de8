-- +goose Up
-- One row per attempt at an event, so a person can see why it failed.
CREATE TABLE attempts (
    id          bigserial   PRIMARY KEY,
    event_id    bigint      NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    attempt     integer     NOT NULL,
    owner       text        NOT NULL,
    outcome     text        NOT NULL, -- done, retry, dead, or lost (refused: the lease had moved on)
    error       text,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL
);
CREATE INDEX attempts_event ON attempts (event_id, attempt);

-- Business keys claimed by handlers (effect.ClaimKey): the durable memory
-- that an effect was applied, kept as long as the business record.
CREATE TABLE effect_keys (
    scope      text        NOT NULL,
    key        text        NOT NULL,
    event_id   bigint,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, key)
);

-- +goose Down
DROP TABLE effect_keys;
DROP TABLE attempts;
