-- +goose Up

-- Recall's row per session. Each recall locks it before it records what it
-- surfaced, so two recalls of one session (the API and a prefetch) never
-- surface the same memory twice or both spend the last of the session's
-- budget. No foreign key to sessions: a backend may ask for recall before
-- its session's first event is accounted.
CREATE TABLE recall_sessions (
    tenant_id  text        NOT NULL REFERENCES tenants ON DELETE CASCADE,
    session_id text        NOT NULL,
    -- Recalls recorded for the session.
    recalls    bigint      NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id)
);

-- Every memory recall surfaced in a session, once per session at most. The
-- session's byte budget counts the rows of its latest compaction
-- (compaction_id '' before the first), so a compaction resets it.
CREATE TABLE recall_surfaced (
    tenant_id     text        NOT NULL,
    session_id    text        NOT NULL,
    scope         text        NOT NULL,
    name          text        NOT NULL,
    revision      bigint      NOT NULL,
    source        text        NOT NULL CHECK (source IN ('api', 'prefetch')),
    -- The user message a prefetch surfaced it beside ('' through the API).
    message_uuid  text        NOT NULL DEFAULT '',
    compaction_id text        NOT NULL DEFAULT '',
    -- The size of the reminder as the agent sees it.
    bytes         bigint      NOT NULL CHECK (bytes >= 0),
    surfaced_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id, scope, name),
    FOREIGN KEY (tenant_id, session_id) REFERENCES recall_sessions ON DELETE CASCADE
);

-- What the context shows beside a user message of a session: the reminders
-- a prefetch surfaced for it, or nothing. Decided once, by whichever comes
-- first — the prefetch recording its result, or a context request that
-- waited long enough and closed the message ('missed') — and never changed,
-- so the context renders the same bytes for the same state.
CREATE TABLE recall_prefetches (
    tenant_id    text        NOT NULL,
    session_id   text        NOT NULL,
    message_uuid text        NOT NULL,
    outcome      text        NOT NULL CHECK (outcome IN ('surfaced', 'none', 'capped', 'failed', 'missed')),
    blocks       text[]      NOT NULL DEFAULT '{}',
    decided_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id, message_uuid),
    FOREIGN KEY (tenant_id, session_id, message_uuid) REFERENCES messages ON DELETE CASCADE
);

-- +goose Down
DROP TABLE recall_prefetches;
DROP TABLE recall_surfaced;
DROP TABLE recall_sessions;
