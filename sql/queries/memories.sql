-- name: MemoryGet :one
SELECT * FROM memories WHERE tenant_id = @tenant_id AND scope = @scope AND name = @name;

-- name: MemoryList :many
-- A scope's memories, most recently updated first; deleted ones only when asked.
SELECT * FROM memories
WHERE tenant_id = @tenant_id AND scope = @scope AND (deleted_at IS NULL OR @include_deleted::boolean)
ORDER BY updated_at DESC, name
LIMIT @max_rows;

-- name: MemoryHeaderList :many
-- What recall scans: a scope's live memories without their bodies, most
-- recently updated first.
SELECT name, revision, type, description, created_at, updated_at FROM memories
WHERE tenant_id = @tenant_id AND scope = @scope AND deleted_at IS NULL
ORDER BY updated_at DESC, name
LIMIT @max_rows;

-- name: MemoryHeadersNamed :many
-- The headers of those of names that are live memories of a scope (what
-- recall shows of the memories the search ranked).
SELECT name, revision, type, description, created_at, updated_at FROM memories
WHERE tenant_id = @tenant_id AND scope = @scope AND name = ANY(@names::text[]) AND deleted_at IS NULL;

-- name: MemoryNames :many
-- The names of a scope's live memories.
SELECT name FROM memories
WHERE tenant_id = @tenant_id AND scope = @scope AND deleted_at IS NULL
ORDER BY name;

-- name: MemoryPut :exec
INSERT INTO memories (tenant_id, scope, name, revision, type, description, body, deleted_at, created_at, updated_at)
VALUES (@tenant_id, @scope, @name, @revision, @type, @description, @body, sqlc.narg('deleted_at'), @created_at, @updated_at)
ON CONFLICT (tenant_id, scope, name) DO UPDATE SET
    revision = excluded.revision,
    type = excluded.type,
    description = excluded.description,
    body = excluded.body,
    deleted_at = excluded.deleted_at,
    created_at = excluded.created_at,
    updated_at = excluded.updated_at;

-- name: MemoryRevisionInsert :exec
INSERT INTO memory_revisions (tenant_id, scope, name, revision, op, actor, reason, source_turns, session_id,
                              restored_from, type, description, body, deleted, created_at)
VALUES (@tenant_id, @scope, @name, @revision, @op, @actor, @reason, @source_turns, @session_id,
        sqlc.narg('restored_from'), @type, @description, @body, @deleted, @created_at);

-- name: MemoryRevisionList :many
SELECT * FROM memory_revisions
WHERE tenant_id = @tenant_id AND scope = @scope AND name = @name
ORDER BY revision;

-- name: MemoryRevisionGet :one
SELECT * FROM memory_revisions
WHERE tenant_id = @tenant_id AND scope = @scope AND name = @name AND revision = @revision;

-- name: MemoryIndexLock :one
-- Returns the scope's index locked until the transaction ends, creating an
-- empty one first. Every change to a scope's memories takes this lock first.
INSERT INTO memory_indexes (tenant_id, scope) VALUES (@tenant_id, @scope)
ON CONFLICT (tenant_id, scope) DO UPDATE SET revision = memory_indexes.revision
RETURNING *;

-- name: MemoryIndexGet :one
SELECT * FROM memory_indexes WHERE tenant_id = @tenant_id AND scope = @scope;

-- name: MemoryIndexSave :exec
UPDATE memory_indexes SET content = @content, revision = @revision, actor = @actor, reason = @reason, updated_at = @updated_at
WHERE tenant_id = @tenant_id AND scope = @scope;

-- name: MemorySectionGet :one
SELECT * FROM memory_sections WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: MemorySectionPut :execrows
-- Stores a session's memory section for a compaction, unless one for that
-- compaction is already stored (the first one written is the one kept).
INSERT INTO memory_sections (tenant_id, session_id, compaction_id, blocks)
VALUES (@tenant_id, @session_id, @compaction_id, @blocks)
ON CONFLICT (tenant_id, session_id) DO UPDATE SET
    compaction_id = excluded.compaction_id, blocks = excluded.blocks, created_at = now()
WHERE memory_sections.compaction_id <> excluded.compaction_id;

-- name: AgentMemoryWriteRecord :one
-- Records a memory write of a session's main agent, with the session's
-- applied seq and message count at that moment (0 before its first event).
INSERT INTO agent_memory_writes (tenant_id, session_id, written_at, seq, position)
SELECT @tenant_id, @session_id, @written_at,
       coalesce((SELECT s.applied_seq FROM sessions s WHERE s.tenant_id = @tenant_id AND s.session_id = @session_id), 0)::bigint,
       coalesce((SELECT s.message_count FROM sessions s WHERE s.tenant_id = @tenant_id AND s.session_id = @session_id), 0)::bigint
ON CONFLICT (tenant_id, session_id) DO UPDATE SET
    written_at = excluded.written_at, seq = excluded.seq, position = excluded.position,
    writes = agent_memory_writes.writes + 1
RETURNING *;

-- name: AgentMemoryWriteGet :one
SELECT * FROM agent_memory_writes WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: ScopeList :many
-- A page of the tenant's scopes that hold memories (live or deleted), in
-- scope order strictly after after_scope, whose names start with both
-- prefixes (an empty prefix: any): how many memories each holds live and deleted, when
-- one last changed, and when the scope was last consolidated.
WITH page AS (
    SELECT m.scope,
           count(*) FILTER (WHERE m.deleted_at IS NULL)::bigint AS live,
           count(*) FILTER (WHERE m.deleted_at IS NOT NULL)::bigint AS deleted,
           max(m.updated_at)::timestamptz AS updated_at
    FROM memories m
    WHERE m.tenant_id = @tenant_id AND m.scope > @after_scope::text
      AND starts_with(m.scope, @kind_prefix::text) AND starts_with(m.scope, @prefix::text)
    GROUP BY m.scope
    ORDER BY m.scope
    LIMIT @max_rows
)
SELECT p.scope, p.live, p.deleted, p.updated_at, d.last_consolidated_at
FROM page p LEFT JOIN dream_scopes d ON d.tenant_id = @tenant_id AND d.scope = p.scope
ORDER BY p.scope;
