-- +goose Up

-- The dreamer's state of each scope it consolidates. last_consolidated_at
-- moves only when a consolidation succeeds (or ends as a proposal), so a
-- run that fails, is killed or dies leaves it where it was and a later scan
-- tries again. last_scan_at is when the scope's sessions were last counted
-- (the scan throttle). The lease lets one consolidation run per scope: its
-- holder renews it while the run lives; once it expires another may take it.
CREATE TABLE dream_scopes (
    tenant_id            text        NOT NULL REFERENCES tenants ON DELETE CASCADE,
    scope                text        NOT NULL,
    last_consolidated_at timestamptz,
    last_scan_at         timestamptz,
    lease_holder         text        NOT NULL DEFAULT '',
    lease_dream_id       text        NOT NULL DEFAULT '',
    lease_taken_at       timestamptz,
    lease_expires_at     timestamptz,
    PRIMARY KEY (tenant_id, scope)
);

-- One consolidation of a scope ("dream"): scheduled by the dreamer's scan or
-- requested by an operator, what it did, and when it stopped short of
-- applying its changes, the changes themselves as a proposal for approval.
CREATE TABLE dreams (
    tenant_id         text        NOT NULL REFERENCES tenants ON DELETE CASCADE,
    dream_id          text        NOT NULL,
    scope             text        NOT NULL,
    trigger           text        NOT NULL CHECK (trigger IN ('scheduled', 'manual')),
    status            text        NOT NULL CHECK (status IN ('requested', 'running', 'completed', 'failed', 'killed',
                                                             'proposed', 'approved', 'superseded')),
    -- The dreamer instance that runs it.
    holder            text        NOT NULL DEFAULT '',
    kill_requested_at timestamptz,
    llm_provider      text        NOT NULL DEFAULT '',
    llm_model         text        NOT NULL DEFAULT '',
    turns             integer     NOT NULL DEFAULT 0,
    tool_calls        integer     NOT NULL DEFAULT 0,
    tool_errors       integer     NOT NULL DEFAULT 0,
    input_tokens      bigint      NOT NULL DEFAULT 0,
    output_tokens     bigint      NOT NULL DEFAULT 0,
    -- The guard: live memories when the run began, how many of them it may
    -- delete or rewrite, and how many it would have.
    memories_live     integer     NOT NULL DEFAULT 0,
    changes_allowed   integer     NOT NULL DEFAULT 0,
    changes_destructive integer NOT NULL DEFAULT 0,
    -- The memories written (created or updated) and deleted, applied or proposed.
    written           text[]      NOT NULL DEFAULT '{}',
    deleted           text[]      NOT NULL DEFAULT '{}',
    -- The staged changes of a proposal (status proposed, then approved).
    proposal          jsonb,
    summary           text        NOT NULL DEFAULT '',
    error             text        NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    updating_at       timestamptz,
    finished_at       timestamptz,
    approved_at       timestamptz,
    PRIMARY KEY (tenant_id, dream_id)
);
CREATE INDEX dreams_scope ON dreams (tenant_id, scope, created_at DESC);

-- The session gate counts the sessions whose memory_scope names a scope
-- (memory_scope @> '{"user": "u-42"}') and were updated since the last
-- consolidation; the dreamer's transcript search reads only those sessions.
CREATE INDEX sessions_memory_scope ON sessions USING gin (memory_scope jsonb_path_ops);

-- The searchable text of a stored message: its text blocks, one per line —
-- what the user and the agent said. Tool calls, tool results and thinking
-- are left out: they are large, mostly files and logs, and the accountant
-- pays for indexing every message it stores.
-- +goose StatementBegin
CREATE FUNCTION message_text(content jsonb) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT coalesce(string_agg(t #>> '{}', E'\n'), '')
    FROM jsonb_path_query(content, 'strict $[*] ? (@.type == "text").text') AS t
$$;
-- +goose StatementEnd

-- Full-text search over messages, for the dreamer's narrow searches of past
-- sessions ('simple': no language's stemming or stop words).
CREATE INDEX messages_text_search ON messages USING gin (to_tsvector('simple', message_text(content)));

-- The dreamer's scan, its one read across tenants: the scopes holding live
-- memories in (tenant, scope) order after a key, with their dream state —
-- keys and times only. It runs as the owner (SECURITY DEFINER), so it keeps
-- working under row-level security (00009 grants it to the services' role).
-- +goose StatementBegin
CREATE FUNCTION mnemos_dream_candidates(after_tenant text, after_scope text, max_rows integer)
RETURNS TABLE (tenant_id text, scope text, last_consolidated_at timestamptz, last_scan_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT i.tenant_id, i.scope, d.last_consolidated_at, d.last_scan_at
    FROM memory_indexes i
    LEFT JOIN dream_scopes d ON d.tenant_id = i.tenant_id AND d.scope = i.scope
    WHERE i.content <> ''
      AND (i.tenant_id > after_tenant OR (i.tenant_id = after_tenant AND i.scope > after_scope))
    ORDER BY i.tenant_id, i.scope
    LIMIT max_rows
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION mnemos_dream_candidates(text, text, integer);
DROP INDEX messages_text_search;
DROP FUNCTION message_text(jsonb);
DROP INDEX sessions_memory_scope;
DROP TABLE dreams;
DROP TABLE dream_scopes;
