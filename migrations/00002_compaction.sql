-- +goose Up

-- What the compactor and the context API keep on the session.
ALTER TABLE sessions
    -- The latest completed compaction: the context starts with its head.
    ADD COLUMN compaction_id        text,
    -- Messages at positions below keep_from are summarized by that compaction.
    ADD COLUMN keep_from            bigint  NOT NULL DEFAULT 0,
    -- Consecutive failed LLM compactions; at the breaker's limit the circuit
    -- opens and auto compaction uses the extractive summary only.
    ADD COLUMN compact_failures     integer NOT NULL DEFAULT 0,
    ADD COLUMN compact_circuit_open boolean NOT NULL DEFAULT false,
    -- After a compaction, a response whose usage is at or above this was
    -- answered from the context before the compaction and is not taken as the
    -- new baseline. 0 when no compaction awaits adoption.
    ADD COLUMN stale_usage_above    bigint  NOT NULL DEFAULT 0,
    -- Counts recorded cache breaks (compactions, micro-compactions).
    ADD COLUMN context_epoch        bigint  NOT NULL DEFAULT 0;

-- One row per compaction, from request to outcome; the id is the job id of
-- the manual compaction API.
CREATE TABLE compactions (
    tenant_id          text        NOT NULL,
    id                 text        NOT NULL,
    session_id         text        NOT NULL,
    -- The accountant's request number for auto compactions (idempotency).
    request            bigint,
    trigger            text        NOT NULL CHECK (trigger IN ('auto', 'manual')),
    direction          text        NOT NULL DEFAULT '' CHECK (direction IN ('', 'from', 'up_to')),
    pivot_uuid         text        NOT NULL DEFAULT '',
    instructions       text        NOT NULL DEFAULT '',
    status             text        NOT NULL DEFAULT 'requested'
                                   CHECK (status IN ('requested', 'running', 'completed', 'failed', 'skipped')),
    lease_until        timestamptz,
    method             text        NOT NULL DEFAULT '' CHECK (method IN ('', 'session_memory', 'full', 'extractive')),
    pre_tokens         bigint      NOT NULL DEFAULT 0,
    post_tokens        bigint      NOT NULL DEFAULT 0,
    -- The last message position the compaction saw, and the first it kept.
    through_position   bigint      NOT NULL DEFAULT -1,
    keep_from          bigint      NOT NULL DEFAULT 0,
    -- The messages the compaction made, as the context renders them.
    head               jsonb       NOT NULL DEFAULT '[]',
    summary            text        NOT NULL DEFAULT '',
    llm_calls          integer     NOT NULL DEFAULT 0,
    llm_retries        integer     NOT NULL DEFAULT 0,
    llm_model          text        NOT NULL DEFAULT '',
    input_tokens       bigint      NOT NULL DEFAULT 0,
    output_tokens      bigint      NOT NULL DEFAULT 0,
    cache_read_tokens  bigint      NOT NULL DEFAULT 0,
    cache_write_tokens bigint      NOT NULL DEFAULT 0,
    error              text        NOT NULL DEFAULT '',
    created_at         timestamptz NOT NULL DEFAULT now(),
    started_at         timestamptz,
    finished_at        timestamptz,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions ON DELETE CASCADE
);
CREATE UNIQUE INDEX compactions_auto_request ON compactions (tenant_id, session_id, request) WHERE request IS NOT NULL;
-- One compaction at a time per session.
CREATE UNIQUE INDEX compactions_one_running ON compactions (tenant_id, session_id) WHERE status = 'running';
CREATE INDEX compactions_by_session ON compactions (tenant_id, session_id, created_at);

-- The rolling notes of a session (session memory). The compactor reads them.
CREATE TABLE session_notes (
    tenant_id               text        NOT NULL,
    session_id              text        NOT NULL,
    content                 text        NOT NULL,
    last_summarized_uuid    text        NOT NULL DEFAULT '',
    tokens_at_update        bigint      NOT NULL DEFAULT 0,
    tool_calls_at_update    bigint      NOT NULL DEFAULT 0,
    version                 bigint      NOT NULL DEFAULT 1,
    updated_at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions ON DELETE CASCADE
);

-- The last context assembled for a session, to tell whether the next one
-- still starts with the same bytes (the provider's prompt cache).
CREATE TABLE context_snapshots (
    tenant_id    text        NOT NULL,
    session_id   text        NOT NULL,
    epoch        bigint      NOT NULL,
    prefix_len   bigint      NOT NULL,
    prefix_hash  bytea       NOT NULL,
    assembled_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions ON DELETE CASCADE
);

-- LLM usage per tenant, day, task, provider and model: what budgets check
-- and what operators bill.
CREATE TABLE llm_usage (
    tenant_id          text   NOT NULL,
    day                date   NOT NULL,
    task               text   NOT NULL,
    provider           text   NOT NULL,
    model              text   NOT NULL,
    calls              bigint NOT NULL DEFAULT 0,
    failed_calls       bigint NOT NULL DEFAULT 0,
    input_tokens       bigint NOT NULL DEFAULT 0,
    output_tokens      bigint NOT NULL DEFAULT 0,
    cache_read_tokens  bigint NOT NULL DEFAULT 0,
    cache_write_tokens bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, day, task, provider, model)
);

-- +goose Down
DROP TABLE llm_usage;
DROP TABLE context_snapshots;
DROP TABLE session_notes;
DROP TABLE compactions;
ALTER TABLE sessions
    DROP COLUMN compaction_id,
    DROP COLUMN keep_from,
    DROP COLUMN compact_failures,
    DROP COLUMN compact_circuit_open,
    DROP COLUMN stale_usage_above,
    DROP COLUMN context_epoch;
