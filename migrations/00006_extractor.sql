-- +goose Up

-- One run per key at a time across every replica (pkg/singlerun): a row per
-- tenant, kind of run and key. A run holds the key while its lease lasts
-- (renewed while it runs, taken over once it expires); a request that
-- arrives meanwhile sets pending, and the holder runs once more (the
-- trailing run) before it lets go.
CREATE TABLE run_leases (
    tenant_id   text        NOT NULL REFERENCES tenants ON DELETE CASCADE,
    -- What runs ("extractor") and on what (a memory scope, say).
    kind        text        NOT NULL,
    key         text        NOT NULL,
    -- The running run: its owner and lease ('' and NULL when none runs).
    owner       text        NOT NULL DEFAULT '',
    lease_until timestamptz,
    -- Requests arrived while a run held the key: one trailing run is owed.
    pending     boolean     NOT NULL DEFAULT false,
    -- Runs finished, trailing ones included.
    runs        bigint      NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, kind, key)
);

-- Trailing runs whose holder stopped (lease released or run out): the sweep finds them.
CREATE INDEX run_leases_pending ON run_leases (kind, lease_until) WHERE pending;

-- The extractor's cursor per session: how far long-term memory extraction
-- has looked at the session's conversation, and the run owed to it.
CREATE TABLE extractor_cursors (
    tenant_id      text        NOT NULL,
    session_id     text        NOT NULL,
    -- The scope the session's memories are written to ("project:repo-x").
    scope          text        NOT NULL DEFAULT '',
    -- Messages before this position were considered (or skipped).
    position       bigint      NOT NULL DEFAULT 0,
    -- The last turn considered.
    seq            bigint      NOT NULL DEFAULT 0,
    -- The latest eligible turn (main agent, closing a user turn) looked at.
    seen_seq       bigint      NOT NULL DEFAULT 0,
    -- A run is owed through turn due_seq (when above seq), requested by
    -- the turn event due_event_id.
    due_seq        bigint      NOT NULL DEFAULT 0,
    due_event_id   text        NOT NULL DEFAULT '',
    -- The main agent's memory writes already accounted for (agent_memory_writes.writes).
    agent_writes   bigint      NOT NULL DEFAULT 0,
    -- What runs did: runs finished, those that wrote memories, turns
    -- skipped because the agent wrote memory itself, failed runs.
    runs           bigint      NOT NULL DEFAULT 0,
    saved_runs     bigint      NOT NULL DEFAULT 0,
    skipped_turns  bigint      NOT NULL DEFAULT 0,
    failed_runs    bigint      NOT NULL DEFAULT 0,
    last_error     text        NOT NULL DEFAULT '',
    last_run_at    timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions ON DELETE CASCADE
);

-- The sessions of a scope with a run owed: what a run of the scope works through.
CREATE INDEX extractor_cursors_due ON extractor_cursors (tenant_id, scope, updated_at) WHERE due_seq > seq;

-- +goose Down
DROP TABLE extractor_cursors;
DROP TABLE run_leases;
