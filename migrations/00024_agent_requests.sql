-- +goose Up

-- The last request the Messages API proxy sent up for a session, when the
-- upstream's answer shows it used the prompt cache (issue 21, "Forked
-- background requests"). The notes writer, the compaction summary and
-- recall's selector fork it: they send it unchanged with their own ask
-- appended, so the provider's cache serves what the agent already paid to
-- write. body is the request as sent (JSON, kept as bytes: the cache
-- matches exact bytes, and jsonb would reorder them); reply is the answer's
-- content when it called no tool, so a fork may follow it; beta is the
-- anthropic-beta header the body needs. One row per session, overwritten
-- by every round; it goes with its session.
CREATE TABLE agent_requests (
    tenant_id  text        NOT NULL,
    session_id text        NOT NULL,
    model      text        NOT NULL,
    body       bytea       NOT NULL,
    reply      bytea,
    beta       text        NOT NULL DEFAULT '',
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions ON DELETE CASCADE
);

SELECT mnemos_enforce_tenant_isolation();

-- +goose Down
DROP TABLE agent_requests;
