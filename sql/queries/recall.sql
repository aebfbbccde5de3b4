-- name: RecallSessionLock :exec
-- Locks the session's recall row until the transaction ends, creating it
-- first, and counts the recall about to be recorded.
INSERT INTO recall_sessions (tenant_id, session_id, recalls) VALUES (@tenant_id, @session_id, 1)
ON CONFLICT (tenant_id, session_id) DO UPDATE SET recalls = recall_sessions.recalls + 1, updated_at = now();

-- name: RecallSurfacedList :many
-- Everything recall surfaced in a session, oldest first.
SELECT * FROM recall_surfaced
WHERE tenant_id = @tenant_id AND session_id = @session_id
ORDER BY surfaced_at, scope, name;

-- name: RecallSurfacedInsert :execrows
-- Records a surfaced memory, unless the session had it surfaced already
-- since the same compaction (0 rows then).
INSERT INTO recall_surfaced (tenant_id, session_id, scope, name, revision, source, message_uuid, compaction_id, bytes)
VALUES (@tenant_id, @session_id, @scope, @name, @revision, @source, @message_uuid, @compaction_id, @bytes)
ON CONFLICT (tenant_id, session_id, compaction_id, scope, name) DO NOTHING;

-- name: RecallPrefetchInsert :execrows
-- Records what the context shows beside a user message, unless that is
-- decided already (0 rows then).
INSERT INTO recall_prefetches (tenant_id, session_id, message_uuid, outcome, blocks)
VALUES (@tenant_id, @session_id, @message_uuid, @outcome, @blocks)
ON CONFLICT (tenant_id, session_id, message_uuid) DO NOTHING;

-- name: RecallPrefetchClose :exec
-- Decides that nothing is shown beside the given user messages, those not
-- decided already.
INSERT INTO recall_prefetches (tenant_id, session_id, message_uuid, outcome)
SELECT @tenant_id, @session_id, u, 'missed' FROM unnest(@uuids::text[]) AS u
ON CONFLICT (tenant_id, session_id, message_uuid) DO NOTHING;

-- name: RecallPrefetchList :many
-- The decisions about the given user messages of a session.
SELECT * FROM recall_prefetches
WHERE tenant_id = @tenant_id AND session_id = @session_id AND message_uuid = ANY(@uuids::text[]);

-- name: RecallMessages :many
-- A session's messages from a round (turn seq) on, in order: what a
-- prefetch reads of the latest rounds.
SELECT * FROM messages
WHERE tenant_id = @tenant_id AND session_id = @session_id AND seq >= @from_seq
ORDER BY position;
