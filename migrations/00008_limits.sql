-- +goose Up

-- Token buckets of the per-tenant rate limits, shared by every replica. A
-- replica takes a few tokens at a time and spends them locally.
CREATE TABLE limit_buckets (
    tenant_id   text             NOT NULL REFERENCES tenants ON DELETE CASCADE,
    -- What the bucket limits ("events": turn events).
    bucket      text             NOT NULL,
    tokens      double precision NOT NULL,
    refilled_at timestamptz      NOT NULL,
    -- What the latest take granted, returned to its taker.
    granted     integer          NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, bucket)
);

-- Sessions that sent a turn recently, for the cap on active sessions. A row
-- older than the tenant's window no longer counts and is pruned lazily.
CREATE TABLE active_sessions (
    tenant_id  text        NOT NULL REFERENCES tenants ON DELETE CASCADE,
    session_id text        NOT NULL,
    active_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, session_id)
);
CREATE INDEX active_sessions_recent ON active_sessions (tenant_id, active_at);

-- +goose Down
DROP TABLE active_sessions;
DROP TABLE limit_buckets;
