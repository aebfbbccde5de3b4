-- The batches of an erasure (pkg/erasure): each statement removes at most
-- @max_rows rows of one table, found by an index that leads with the
-- tenant and the session or scope, and reports how many it removed.

-- name: ErasureStart :one
-- Records an erasure's intent, or finds the unfinished erasure of the same
-- target: a second request joins the first.
INSERT INTO erasures (tenant_id, kind, target, actor)
VALUES (@tenant_id, @kind, @target, @actor)
ON CONFLICT (tenant_id, kind, target) WHERE finished_at IS NULL
DO UPDATE SET worked_at = now()
RETURNING *;

-- name: ErasureGet :one
SELECT * FROM erasures WHERE tenant_id = @tenant_id AND id = @id;

-- name: ErasureTake :one
-- Takes an unfinished erasure up (the sweep then leaves it for its lease)
-- and adds sessions to the ones it covers.
UPDATE erasures SET worked_at = now(),
    sessions = ARRAY(SELECT DISTINCT unnest(sessions || @sessions::text[]) ORDER BY 1)
WHERE tenant_id = @tenant_id AND id = @id AND finished_at IS NULL
RETURNING *;

-- name: ErasureCount :exec
-- Adds the rows a batch removed from a table, in the batch's transaction.
UPDATE erasures SET deleted = jsonb_set(deleted, ARRAY[@tbl::text], to_jsonb(coalesce((deleted ->> @tbl::text)::bigint, 0) + @rows::bigint)),
    worked_at = now()
WHERE tenant_id = @tenant_id AND id = @id;

-- name: ErasureFinish :one
UPDATE erasures SET finished_at = now()
WHERE tenant_id = @tenant_id AND id = @id AND finished_at IS NULL
RETURNING *;

-- name: ErasureUnfinished :many
-- Unfinished erasures of every tenant nobody took up since before.
SELECT tenant_id::text, id::bigint FROM mnemos_unfinished_erasures(@before::timestamptz, @max_rows::integer);

-- name: ErasureSessionPending :one
-- Whether an erasure of the session is unfinished: its turns are refused meanwhile.
SELECT EXISTS (SELECT 1 FROM erasures WHERE tenant_id = @tenant_id AND kind = 'session' AND target = @target AND finished_at IS NULL);

-- name: EraseThreadsOf :many
-- The Mnemos sessions the proxy keeps as threads of a client's session.
SELECT thread_id FROM proxy_threads WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: EraseSessionRecallPrefetches :execrows
DELETE FROM recall_prefetches d WHERE d.tenant_id = @tenant_id AND (d.session_id, d.message_uuid) IN (
    SELECT x.session_id, x.message_uuid FROM recall_prefetches x WHERE x.tenant_id = @tenant_id AND x.session_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionRecallSurfaced :execrows
DELETE FROM recall_surfaced d WHERE d.tenant_id = @tenant_id AND (d.session_id, d.compaction_id, d.scope, d.name) IN (
    SELECT x.session_id, x.compaction_id, x.scope, x.name FROM recall_surfaced x WHERE x.tenant_id = @tenant_id AND x.session_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionRecallSessions :execrows
DELETE FROM recall_sessions d WHERE d.tenant_id = @tenant_id AND (d.session_id) IN (
    SELECT x.session_id FROM recall_sessions x WHERE x.tenant_id = @tenant_id AND x.session_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionContentReplacements :execrows
DELETE FROM content_replacements d WHERE d.tenant_id = @tenant_id AND (d.session_id, d.tool_use_id, d.kind) IN (
    SELECT x.session_id, x.tool_use_id, x.kind FROM content_replacements x WHERE x.tenant_id = @tenant_id AND x.session_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionToolResults :execrows
DELETE FROM tool_results d WHERE d.tenant_id = @tenant_id AND (d.id) IN (
    SELECT x.id FROM tool_results x WHERE x.tenant_id = @tenant_id AND x.session_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionMessages :execrows
DELETE FROM messages d WHERE d.tenant_id = @tenant_id AND (d.session_id, d.uuid) IN (
    SELECT x.session_id, x.uuid FROM messages x WHERE x.tenant_id = @tenant_id AND x.session_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionTurns :execrows
DELETE FROM turns d WHERE d.tenant_id = @tenant_id AND (d.event_id) IN (
    SELECT x.event_id FROM turns x WHERE x.tenant_id = @tenant_id AND x.session_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionCompactions :execrows
DELETE FROM compactions d WHERE d.tenant_id = @tenant_id AND (d.id) IN (
    SELECT x.id FROM compactions x WHERE x.tenant_id = @tenant_id AND x.session_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionSessionNotes :execrows
DELETE FROM session_notes d WHERE d.tenant_id = @tenant_id AND (d.session_id) IN (
    SELECT x.session_id FROM session_notes x WHERE x.tenant_id = @tenant_id AND x.session_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionContextSnapshots :execrows
DELETE FROM context_snapshots d WHERE d.tenant_id = @tenant_id AND (d.session_id) IN (
    SELECT x.session_id FROM context_snapshots x WHERE x.tenant_id = @tenant_id AND x.session_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionMemorySections :execrows
DELETE FROM memory_sections d WHERE d.tenant_id = @tenant_id AND (d.session_id) IN (
    SELECT x.session_id FROM memory_sections x WHERE x.tenant_id = @tenant_id AND x.session_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionAgentMemoryWrites :execrows
DELETE FROM agent_memory_writes d WHERE d.tenant_id = @tenant_id AND (d.session_id) IN (
    SELECT x.session_id FROM agent_memory_writes x WHERE x.tenant_id = @tenant_id AND x.session_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionExtractorCursors :execrows
DELETE FROM extractor_cursors d WHERE d.tenant_id = @tenant_id AND (d.session_id) IN (
    SELECT x.session_id FROM extractor_cursors x WHERE x.tenant_id = @tenant_id AND x.session_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionActiveSessions :execrows
DELETE FROM active_sessions d WHERE d.tenant_id = @tenant_id AND (d.session_id) IN (
    SELECT x.session_id FROM active_sessions x WHERE x.tenant_id = @tenant_id AND x.session_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionAgentRequestPieces :execrows
DELETE FROM agent_request_pieces d WHERE d.tenant_id = @tenant_id AND (d.session_id, d.idx) IN (
    SELECT x.session_id, x.idx FROM agent_request_pieces x WHERE x.tenant_id = @tenant_id AND x.session_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionAgentRequests :execrows
DELETE FROM agent_requests d WHERE d.tenant_id = @tenant_id AND (d.session_id) IN (
    SELECT x.session_id FROM agent_requests x WHERE x.tenant_id = @tenant_id AND x.session_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionProxyPaths :execrows
DELETE FROM proxy_paths d WHERE d.tenant_id = @tenant_id AND (d.thread_id, d.position) IN (
    SELECT x.thread_id, x.position FROM proxy_paths x WHERE x.tenant_id = @tenant_id AND x.thread_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionSessions :execrows
DELETE FROM sessions d WHERE d.tenant_id = @tenant_id AND (d.session_id) IN (
    SELECT x.session_id FROM sessions x WHERE x.tenant_id = @tenant_id AND x.session_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionProxyThreads :execrows
-- Threads go by their own id or their client's session's.
DELETE FROM proxy_threads d WHERE d.tenant_id = @tenant_id AND d.thread_id IN (
    SELECT x.thread_id FROM proxy_threads x WHERE x.tenant_id = @tenant_id
      AND (x.thread_id = ANY(@sessions::text[]) OR x.session_id = ANY(@sessions::text[])) LIMIT @max_rows);

-- name: EraseSessionOutbox :execrows
-- Events not yet relayed whose subject (<kind>.<tenant>.<session>) names one
-- of the sessions.
DELETE FROM outbox d WHERE d.id IN (
    SELECT x.id FROM outbox x WHERE x.tenant_id = @tenant_id
      AND split_part(x.subject, '.', -1) = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseSessionMemoryRevisions :execrows
-- Memories belong to their scope, not to the session that wrote them: a
-- revision keeps its memory but forgets the session and its turns.
UPDATE memory_revisions d SET session_id = '', source_turns = '{}'
WHERE d.tenant_id = @tenant_id AND (d.scope, d.name, d.revision) IN (
    SELECT x.scope, x.name, x.revision FROM memory_revisions x WHERE x.tenant_id = @tenant_id
      AND x.session_id = ANY(@sessions::text[]) LIMIT @max_rows);

-- name: EraseScopeRecallPrefetches :execrows
-- What prefetches showed beside a user message, when a memory of the scope
-- was among it: the message shows nothing from then on (the other
-- scopes' reminders of that message go too).
UPDATE recall_prefetches p SET outcome = 'none', blocks = '{}'
WHERE p.tenant_id = @tenant_id AND (p.session_id, p.message_uuid) IN (
    SELECT r.session_id, r.message_uuid FROM recall_surfaced r
    JOIN recall_prefetches q ON q.tenant_id = r.tenant_id AND q.session_id = r.session_id AND q.message_uuid = r.message_uuid
    WHERE r.tenant_id = @tenant_id AND r.scope = @scope AND r.message_uuid <> '' AND q.blocks <> '{}'
    LIMIT @max_rows);

-- name: EraseScopeMemorySections :execrows
-- The memory sections rendered for sessions of the scope (memory_scope
-- holding scope_filter): the next context renders them again.
DELETE FROM memory_sections d WHERE d.tenant_id = @tenant_id AND d.session_id IN (
    SELECT m.session_id FROM memory_sections m
    JOIN sessions s ON s.tenant_id = m.tenant_id AND s.session_id = m.session_id
    WHERE m.tenant_id = @tenant_id AND s.memory_scope @> @scope_filter::jsonb LIMIT @max_rows);

-- name: EraseScopeMemoryRevisions :execrows
DELETE FROM memory_revisions d WHERE d.tenant_id = @tenant_id AND (d.scope, d.name, d.revision) IN (
    SELECT x.scope, x.name, x.revision FROM memory_revisions x WHERE x.tenant_id = @tenant_id AND x.scope = @scope LIMIT @max_rows);

-- name: EraseScopeMemories :execrows
DELETE FROM memories d WHERE d.tenant_id = @tenant_id AND (d.scope, d.name) IN (
    SELECT x.scope, x.name FROM memories x WHERE x.tenant_id = @tenant_id AND x.scope = @scope LIMIT @max_rows);

-- name: EraseScopeMemoryIndexes :execrows
DELETE FROM memory_indexes d WHERE d.tenant_id = @tenant_id AND (d.scope) IN (
    SELECT x.scope FROM memory_indexes x WHERE x.tenant_id = @tenant_id AND x.scope = @scope LIMIT @max_rows);

-- name: EraseScopeRecallSurfaced :execrows
DELETE FROM recall_surfaced d WHERE d.tenant_id = @tenant_id AND (d.session_id, d.compaction_id, d.scope, d.name) IN (
    SELECT x.session_id, x.compaction_id, x.scope, x.name FROM recall_surfaced x WHERE x.tenant_id = @tenant_id AND x.scope = @scope LIMIT @max_rows);

-- name: EraseScopeDreams :execrows
DELETE FROM dreams d WHERE d.tenant_id = @tenant_id AND (d.dream_id) IN (
    SELECT x.dream_id FROM dreams x WHERE x.tenant_id = @tenant_id AND x.scope = @scope LIMIT @max_rows);

-- name: EraseScopeDreamScopes :execrows
DELETE FROM dream_scopes d WHERE d.tenant_id = @tenant_id AND (d.scope) IN (
    SELECT x.scope FROM dream_scopes x WHERE x.tenant_id = @tenant_id AND x.scope = @scope LIMIT @max_rows);

-- name: EraseScopeRunLeases :execrows
DELETE FROM run_leases d WHERE d.tenant_id = @tenant_id AND (d.kind, d.key) IN (
    SELECT x.kind, x.key FROM run_leases x WHERE x.tenant_id = @tenant_id AND x.kind = 'extractor' AND x.key = @scope LIMIT @max_rows);
