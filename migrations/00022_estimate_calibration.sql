-- +goose Up

-- Prediction of the next request (issue 21). estimate_factor and
-- dense_factor are the real growth per estimated token of prose and of dense
-- content (code, tool output, JSON, base64) the session's responses showed
-- (0: none yet), applied to the estimate of what came after the last
-- response; pending_dense is the dense part of pending_tokens.
-- prefix_tokens and prefix_hash are the estimate and the hash of the
-- request's system prompt and tool schemas as the client last named them:
-- counted before the first usage and after a compaction, when no usage
-- includes them; a preflight naming the same hash costs nothing to count.
ALTER TABLE sessions
    ADD COLUMN estimate_factor double precision NOT NULL DEFAULT 0,
    ADD COLUMN dense_factor    double precision NOT NULL DEFAULT 0,
    ADD COLUMN pending_dense   bigint           NOT NULL DEFAULT 0,
    ADD COLUMN prefix_tokens   bigint           NOT NULL DEFAULT 0,
    ADD COLUMN prefix_hash     text             NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sessions
    DROP COLUMN prefix_hash,
    DROP COLUMN prefix_tokens,
    DROP COLUMN pending_dense,
    DROP COLUMN dense_factor,
    DROP COLUMN estimate_factor;
