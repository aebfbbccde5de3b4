-- +goose Up

-- A tenant is one customer platform; every other row belongs to exactly one.
CREATE TABLE tenants (
    tenant_id  text        PRIMARY KEY,
    name       text        NOT NULL,
    settings   jsonb       NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now()
);

-- API keys are stored as SHA-256 digests: keys are long random secrets, so a
-- fast digest is enough and lets the gateway look a key up by its hash.
CREATE TABLE api_keys (
    key_hash   bytea       PRIMARY KEY,
    tenant_id  text        NOT NULL REFERENCES tenants ON DELETE CASCADE,
    name       text        NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

-- One row per agent session: the accountant's running state.
CREATE TABLE sessions (
    tenant_id            text        NOT NULL REFERENCES tenants ON DELETE CASCADE,
    session_id           text        NOT NULL,
    agent_id             text        NOT NULL DEFAULT 'main',
    model                text        NOT NULL DEFAULT '',
    context_window       bigint      NOT NULL DEFAULT 0,
    max_output_tokens    bigint      NOT NULL DEFAULT 0,
    memory_scope         jsonb       NOT NULL DEFAULT '{}',
    applied_seq          bigint      NOT NULL DEFAULT 0,
    waiting_turns        bigint      NOT NULL DEFAULT 0,
    message_count        bigint      NOT NULL DEFAULT 0,
    baseline_tokens      bigint      NOT NULL DEFAULT 0,
    has_usage            boolean     NOT NULL DEFAULT false,
    pending_tokens       bigint      NOT NULL DEFAULT 0,
    token_count          bigint      NOT NULL DEFAULT 0,
    state                text        NOT NULL DEFAULT 'ok',
    compaction_in_flight boolean     NOT NULL DEFAULT false,
    compact_requests     bigint      NOT NULL DEFAULT 0,
    auto_compact_enabled boolean     NOT NULL DEFAULT true,
    tool_calls_total     bigint      NOT NULL DEFAULT 0,
    rejected_turns       bigint      NOT NULL DEFAULT 0,
    last_response_at     timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id),
    CHECK (state IN ('ok', 'warning', 'error', 'autocompact', 'blocking'))
);

-- Every turn event the accountant received. An event that arrives ahead of
-- its predecessor waits here, with its payload, until the gap closes.
CREATE TABLE turns (
    tenant_id     text        NOT NULL,
    session_id    text        NOT NULL,
    event_id      text        NOT NULL,
    seq           bigint      NOT NULL CHECK (seq > 0),
    status        text        NOT NULL DEFAULT 'pending',
    reason        text        NOT NULL DEFAULT '',
    payload       bytea,
    token_count   bigint,
    state         text,
    received_at   timestamptz NOT NULL DEFAULT now(),
    applied_at    timestamptz,
    PRIMARY KEY (tenant_id, event_id),
    UNIQUE (tenant_id, session_id, seq),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions ON DELETE CASCADE,
    CHECK (status IN ('pending', 'applied', 'rejected', 'skipped'))
);
CREATE INDEX turns_pending ON turns (tenant_id, session_id, seq) WHERE status = 'pending';

-- The conversation, one row per message, in the order the accountant applied them.
CREATE TABLE messages (
    tenant_id       text        NOT NULL,
    session_id      text        NOT NULL,
    uuid            text        NOT NULL,
    position        bigint      NOT NULL,
    seq             bigint      NOT NULL,
    role            text        NOT NULL CHECK (role IN ('user', 'assistant')),
    content         jsonb       NOT NULL,
    content_hash    bytea       NOT NULL,
    estimate_tokens bigint      NOT NULL,
    is_response     boolean     NOT NULL DEFAULT false,
    stop_reason     text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id, uuid),
    UNIQUE (tenant_id, session_id, position),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions ON DELETE CASCADE
);

-- Tool results too large to keep in context, stored whole.
CREATE TABLE tool_results (
    tenant_id    text        NOT NULL,
    id           text        NOT NULL,
    session_id   text        NOT NULL,
    message_uuid text        NOT NULL,
    tool_use_id  text        NOT NULL,
    content      text        NOT NULL,
    size_chars   bigint      NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, session_id, tool_use_id),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions ON DELETE CASCADE
);

-- Decisions to replace a tool result's content in context. Recorded once and
-- never changed, so the rendered context (and the provider's prompt cache) is stable.
CREATE TABLE content_replacements (
    tenant_id      text        NOT NULL,
    session_id     text        NOT NULL,
    tool_use_id    text        NOT NULL,
    kind           text        NOT NULL CHECK (kind IN ('offload', 'microcompact')),
    tool_result_id text,
    replacement    text        NOT NULL,
    decided_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id, tool_use_id, kind),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions ON DELETE CASCADE
);

-- Transactional outbox: events written in the same transaction as their
-- effect, published to JetStream by the relay afterwards.
CREATE TABLE outbox (
    id         bigserial   PRIMARY KEY,
    tenant_id  text        NOT NULL,
    subject    text        NOT NULL,
    msg_id     text        NOT NULL,
    payload    bytea       NOT NULL,
    headers    jsonb       NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE outbox;
DROP TABLE content_replacements;
DROP TABLE tool_results;
DROP TABLE messages;
DROP TABLE turns;
DROP TABLE sessions;
DROP TABLE api_keys;
DROP TABLE tenants;
