-- +goose Up

-- Long-term memories, one row per memory of a scope ("user:<id>",
-- "project:<id>", "local:<id>", "agent:<type>"), holding its current state.
-- A deleted memory keeps its row (deleted_at set) so it can be rolled back.
CREATE TABLE memories (
    tenant_id   text        NOT NULL REFERENCES tenants ON DELETE CASCADE,
    scope       text        NOT NULL,
    name        text        NOT NULL,
    -- The latest revision's number (memory_revisions).
    revision    bigint      NOT NULL CHECK (revision > 0),
    type        text        NOT NULL CHECK (type IN ('user', 'feedback', 'project', 'reference')),
    description text        NOT NULL,
    body        text        NOT NULL,
    deleted_at  timestamptz,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, scope, name)
);
CREATE INDEX memories_recent ON memories (tenant_id, scope, updated_at DESC) WHERE deleted_at IS NULL;

-- Every change of a memory, with the whole document as it was after it: who
-- made it, why, from which turns. Rollbacks are revisions too.
CREATE TABLE memory_revisions (
    tenant_id     text        NOT NULL,
    scope         text        NOT NULL,
    name          text        NOT NULL,
    revision      bigint      NOT NULL CHECK (revision > 0),
    op            text        NOT NULL CHECK (op IN ('created', 'updated', 'deleted', 'restored')),
    actor         text        NOT NULL CHECK (actor IN ('agent', 'extractor', 'dreamer', 'api')),
    reason        text        NOT NULL DEFAULT '',
    source_turns  text[]      NOT NULL DEFAULT '{}',
    session_id    text        NOT NULL DEFAULT '',
    -- The revision a rollback went back to (NULL for other changes).
    restored_from bigint,
    type          text        NOT NULL,
    description   text        NOT NULL,
    body          text        NOT NULL,
    deleted       boolean     NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, scope, name, revision),
    FOREIGN KEY (tenant_id, scope, name) REFERENCES memories ON DELETE CASCADE
);

-- The index of a scope (MEMORY.md): one line per live memory, in the order
-- and with the hooks its editors chose. Every memory change updates it in the
-- same transaction; its row is also the lock that orders a scope's writes.
CREATE TABLE memory_indexes (
    tenant_id  text        NOT NULL REFERENCES tenants ON DELETE CASCADE,
    scope      text        NOT NULL,
    content    text        NOT NULL DEFAULT '',
    revision   bigint      NOT NULL DEFAULT 0,
    actor      text        NOT NULL DEFAULT '',
    reason     text        NOT NULL DEFAULT '',
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, scope)
);

-- The memory section of a session's context, rendered once and reused byte
-- for byte until the session's next compaction (compaction_id '' before the first).
CREATE TABLE memory_sections (
    tenant_id     text        NOT NULL,
    session_id    text        NOT NULL,
    compaction_id text        NOT NULL DEFAULT '',
    blocks        text[]      NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions ON DELETE CASCADE
);

-- The latest memory write a session's main agent made itself, through the
-- API: when, and how far the session was accounted then. The extractor skips
-- turns whose memory the agent already wrote. No foreign key to sessions: an
-- agent may write before its session's first event is accounted.
CREATE TABLE agent_memory_writes (
    tenant_id   text        NOT NULL REFERENCES tenants ON DELETE CASCADE,
    session_id  text        NOT NULL,
    written_at  timestamptz NOT NULL,
    -- The session's applied seq and message count at the write.
    seq         bigint      NOT NULL,
    position    bigint      NOT NULL,
    writes      bigint      NOT NULL DEFAULT 1,
    PRIMARY KEY (tenant_id, session_id)
);

-- +goose Down
DROP TABLE agent_memory_writes;
DROP TABLE memory_sections;
DROP TABLE memory_indexes;
DROP TABLE memory_revisions;
DROP TABLE memories;
