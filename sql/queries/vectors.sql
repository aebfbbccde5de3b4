-- name: MessageVectorResume :one
-- The position after the last message of the session the embedder read
-- with model (0 when none): it embeds from there.
SELECT coalesce(max(position) + 1, 0)::bigint FROM message_vectors
WHERE tenant_id = @tenant_id AND session_id = @session_id AND model = @model;

-- name: MessagesToEmbed :many
-- At most max_rows of the session's messages from a position on, in order,
-- with only what the embedder reads.
SELECT position, content FROM messages
WHERE tenant_id = @tenant_id AND session_id = @session_id AND position >= @from_position
ORDER BY position
LIMIT @max_rows;

-- name: MessageVectorPutMany :many
-- Stores the vectors of a session's messages: positions and vectors are
-- parallel (a NULL vector marks a message without text). A message read
-- again with the same model keeps its row; with another model it is
-- replaced. It returns the positions it wrote.
INSERT INTO message_vectors (tenant_id, session_id, position, model, vector)
SELECT @tenant_id::text, @session_id::text, u.position, @model::text, u.vector
FROM ROWS FROM (unnest(@positions::bigint[]), unnest(@vectors::bytea[])) AS u(position, vector)
ON CONFLICT (tenant_id, session_id, position) DO UPDATE
SET model = excluded.model, vector = excluded.vector, created_at = now()
WHERE message_vectors.model <> excluded.model
RETURNING position;

-- name: MemoriesToEmbed :many
-- At most max_rows live memories of the scope without a vector of model at
-- their current revision, least recently changed first.
SELECT m.name, m.revision, m.description, m.body FROM memories m
LEFT JOIN memory_vectors v ON v.tenant_id = m.tenant_id AND v.scope = m.scope AND v.name = m.name
WHERE m.tenant_id = @tenant_id AND m.scope = @scope AND m.deleted_at IS NULL
  AND (v.name IS NULL OR v.revision < m.revision OR v.model <> @model::text)
ORDER BY m.updated_at, m.name
LIMIT @max_rows;

-- name: MemoryVectorPutMany :many
-- Stores the vectors of a scope's memories: names, revisions and vectors
-- are parallel. A vector of an older revision or another model is
-- replaced; a newer one is kept. It returns the names it wrote.
INSERT INTO memory_vectors (tenant_id, scope, name, revision, model, vector)
SELECT @tenant_id::text, @scope::text, u.name, u.revision, @model::text, u.vector
FROM ROWS FROM (unnest(@names::text[]), unnest(@revisions::bigint[]), unnest(@vectors::bytea[])) AS u(name, revision, vector)
ON CONFLICT (tenant_id, scope, name) DO UPDATE
SET revision = excluded.revision, model = excluded.model, vector = excluded.vector, created_at = now()
WHERE memory_vectors.revision < excluded.revision OR memory_vectors.model <> excluded.model
RETURNING name;

-- name: ScopeVectorSessions :many
-- The sessions whose memory_scope holds scope_filter (session_id alone
-- when it is not ''), each with the version of its message vectors (0 when
-- it has none): what a search's cache of vectors checks itself against.
-- The most recently updated first: a search's equal scores keep this
-- order, so recency breaks ties as in the lexical ranking.
SELECT s.session_id, coalesce(v.version, 0)::bigint AS version FROM sessions s
LEFT JOIN message_vector_versions v ON v.tenant_id = s.tenant_id AND v.session_id = s.session_id
WHERE s.tenant_id = @tenant_id AND s.memory_scope @> @scope_filter::jsonb
  AND (@session_id::text = '' OR s.session_id = @session_id::text)
ORDER BY s.updated_at DESC, s.session_id;

-- name: SessionMessageVectors :many
-- The vectors of model of the messages of the sessions session_ids names,
-- in no order (sorting them here would cost more than the read).
SELECT v.session_id, v.position, v.vector FROM message_vectors v
WHERE v.tenant_id = @tenant_id AND v.session_id = ANY(@session_ids::text[])
  AND v.model = @model AND v.vector IS NOT NULL;

-- name: ScopeMemoryVectors :many
-- The vectors of model of the scope's live memories, with when each was
-- last updated.
SELECT v.name, v.vector, m.updated_at FROM memory_vectors v
JOIN memories m ON m.tenant_id = v.tenant_id AND m.scope = v.scope AND m.name = v.name
WHERE v.tenant_id = @tenant_id AND v.scope = @scope AND v.model = @model AND m.deleted_at IS NULL;

-- name: MessageHeads :many
-- The role and time of each stored message session_ids and positions name
-- (parallel arrays): one probe by the session's position each.
SELECT k.session_id::text AS session_id, k.position::bigint AS position, m.role, m.created_at
FROM ROWS FROM (unnest(@session_ids::text[]), unnest(@positions::bigint[])) AS k(session_id, position)
CROSS JOIN LATERAL (
    SELECT role, created_at FROM messages
    WHERE tenant_id = @tenant_id AND messages.session_id = k.session_id AND messages.position = k.position
    LIMIT 1
) m;
