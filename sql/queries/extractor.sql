-- name: ExtractorCursorEnsure :exec
-- The session's cursor row, made on its first eligible turn.
INSERT INTO extractor_cursors (tenant_id, session_id) VALUES (@tenant_id, @session_id)
ON CONFLICT (tenant_id, session_id) DO NOTHING;

-- name: ExtractorCursorGetForUpdate :one
SELECT * FROM extractor_cursors WHERE tenant_id = @tenant_id AND session_id = @session_id FOR UPDATE;

-- name: ExtractorCursorGet :one
SELECT * FROM extractor_cursors WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: ExtractorCursorSee :exec
-- Records an eligible turn looked at; when due, a run writing to scope is
-- owed through it (unless one is owed through a later turn already).
UPDATE extractor_cursors SET
    seen_seq = greatest(seen_seq, @seq),
    due_event_id = CASE WHEN @due::bool AND @seq > due_seq THEN @event_id ELSE due_event_id END,
    scope = CASE WHEN @due::bool AND @seq > due_seq THEN @scope ELSE scope END,
    due_seq = CASE WHEN @due::bool THEN greatest(due_seq, @seq) ELSE due_seq END,
    updated_at = now()
WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: ExtractorCursorAdvance :exec
-- Moves the cursor through turn seq and position (never back). A run owed
-- through a later turn stays owed. skipped: the main agent wrote memory
-- itself (its writes up to agent_writes are accounted for); ran / saved
-- count the run.
UPDATE extractor_cursors SET
    position = greatest(position, @position),
    seq = greatest(seq, @seq),
    seen_seq = greatest(seen_seq, @seq),
    due_seq = CASE WHEN due_seq <= @seq THEN 0 ELSE due_seq END,
    agent_writes = greatest(agent_writes, @agent_writes),
    skipped_turns = skipped_turns + CASE WHEN @skipped::bool THEN 1 ELSE 0 END,
    runs = runs + CASE WHEN @ran::bool THEN 1 ELSE 0 END,
    saved_runs = saved_runs + CASE WHEN @saved::bool THEN 1 ELSE 0 END,
    last_error = CASE WHEN @ran::bool THEN '' ELSE last_error END,
    last_run_at = CASE WHEN @ran::bool THEN now() ELSE last_run_at END,
    updated_at = now()
WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: ExtractorCursorFail :exec
-- A run whose model call failed: the cursor stays (the next run reads
-- these messages again), the run owed through seq is dropped.
UPDATE extractor_cursors SET
    due_seq = CASE WHEN due_seq <= @seq THEN 0 ELSE due_seq END,
    runs = runs + 1,
    failed_runs = failed_runs + 1,
    last_error = @last_error,
    last_run_at = now(),
    updated_at = now()
WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: ExtractorDueSessions :many
-- The sessions writing to scope with a run owed, longest waiting first.
SELECT session_id FROM extractor_cursors
WHERE tenant_id = @tenant_id AND scope = @scope AND due_seq > seq
ORDER BY updated_at
LIMIT @max_rows;

-- name: MessageClosingRounds :one
-- How many rounds of the session after turn after_seq, through through_seq,
-- close a user turn (their response stopped with end_turn and calls no
-- tool); from_position bounds the scan (the cursor's position).
SELECT count(*) FROM messages
WHERE tenant_id = @tenant_id AND session_id = @session_id AND position >= @from_position
  AND is_response AND seq > @after_seq AND seq <= @through_seq
  AND stop_reason = 'end_turn' AND NOT content @> '[{"type": "tool_use"}]'::jsonb;

-- name: MessageEndOfTurn :one
-- The position after the session's last message of turn seq or before.
SELECT coalesce(max(position) + 1, 0)::bigint FROM messages
WHERE tenant_id = @tenant_id AND session_id = @session_id AND seq <= @seq;

-- name: MessageListRange :many
-- The session's messages from a position on, of turns through seq: the
-- most recent max_rows of them, newest first.
SELECT * FROM messages
WHERE tenant_id = @tenant_id AND session_id = @session_id AND position >= @from_position AND seq <= @through_seq
ORDER BY position DESC
LIMIT @max_rows;

-- name: ExtractorCreatedFor :many
-- The memories the extractor created from a session's turn (event_id among
-- the revision's source turns), with their scopes: what an earlier run for
-- that turn wrote before it was cut short, if any, and still there. Served by
-- memory_revisions_extractor_created, by the session alone (the scope is
-- checked by the caller, so the primary key, led by the scope, is no
-- candidate).
SELECT r.scope, r.name FROM memory_revisions r
WHERE r.tenant_id = @tenant_id AND r.session_id = @session_id AND r.actor = 'extractor' AND r.op = 'created'
    AND @event_id::text = ANY(r.source_turns)
    -- Only a memory still there: one deleted since is nothing to announce.
    AND EXISTS (SELECT 1 FROM memories m WHERE m.tenant_id = r.tenant_id AND m.scope = r.scope AND m.name = r.name AND m.deleted_at IS NULL);
