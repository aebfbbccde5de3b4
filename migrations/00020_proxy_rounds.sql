-- +goose Up

-- The Messages API proxy (POST /v1/messages) publishes each round it
-- forwards as a turn event. A client sends its whole conversation every
-- time, so the proxy remembers, per session, the last seq it gave a round
-- and how many of the conversation's messages it has published: the next
-- round publishes only what follows.
ALTER TABLE sessions
    ADD COLUMN proxy_seq bigint NOT NULL DEFAULT 0,
    ADD COLUMN proxy_messages bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE sessions DROP COLUMN proxy_messages, DROP COLUMN proxy_seq;
