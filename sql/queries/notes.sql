-- name: NotesGet :one
SELECT * FROM session_notes WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: NotesEnsure :exec
-- The session's notes row, made on its first accounted turn.
INSERT INTO session_notes (tenant_id, session_id) VALUES (@tenant_id, @session_id)
ON CONFLICT (tenant_id, session_id) DO NOTHING;

-- name: NotesGetForUpdate :one
SELECT * FROM session_notes WHERE tenant_id = @tenant_id AND session_id = @session_id FOR UPDATE;

-- name: NotesObserve :exec
-- Records a turn the service looked at and, when a compaction lowered the
-- count, moves the gate's mark down to it.
UPDATE session_notes SET
    seen_seq = greatest(seen_seq, @seq),
    mark_tokens = CASE WHEN @rebase::bool THEN @tokens ELSE mark_tokens END
WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: NotesClaim :execrows
-- Takes the session's update for owner until lease_until, unless a live
-- claim holds it. A trailing run waiting is taken over by this one.
UPDATE session_notes SET update_owner = @owner, update_lease_until = @lease_until, pending = false
WHERE tenant_id = @tenant_id AND session_id = @session_id
  AND (update_lease_until IS NULL OR update_lease_until < now());

-- name: NotesMarkPending :exec
-- Coalesces a request into the trailing run, keeping the newest turn.
UPDATE session_notes SET
    pending = true,
    pending_seq = @seq,
    pending_tokens = @tokens,
    pending_tool_calls_total = @tool_calls_total,
    pending_tool_calls = @tool_calls
WHERE tenant_id = @tenant_id AND session_id = @session_id AND (NOT pending OR pending_seq < @seq);

-- name: NotesClearPending :exec
UPDATE session_notes SET pending = false WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: NotesRenew :execrows
UPDATE session_notes SET update_lease_until = @lease_until
WHERE tenant_id = @tenant_id AND session_id = @session_id AND update_owner = @owner AND update_lease_until IS NOT NULL;

-- name: NotesRelease :execrows
UPDATE session_notes SET update_owner = '', update_lease_until = NULL
WHERE tenant_id = @tenant_id AND session_id = @session_id AND update_owner = @owner;

-- name: NotesSave :one
-- Stores an update's notes, if owner still holds the claim.
UPDATE session_notes SET
    content = @content,
    last_summarized_uuid = @last_summarized_uuid,
    last_summarized_position = @last_summarized_position,
    tokens_at_update = @mark_tokens,
    tool_calls_at_update = @mark_tool_calls,
    mark_attempted = true,
    mark_seq = @mark_seq,
    mark_tokens = @mark_tokens,
    mark_tool_calls = @mark_tool_calls,
    llm_model = @llm_model,
    last_error = '',
    version = version + 1,
    updated_at = now()
WHERE tenant_id = @tenant_id AND session_id = @session_id AND update_owner = @owner AND update_lease_until IS NOT NULL
RETURNING version;

-- name: NotesRecordAttempt :execrows
-- An update that changed nothing (its answer was rejected, or the call
-- failed): the notes stay, the gate measures from this attempt.
UPDATE session_notes SET
    mark_attempted = true,
    mark_seq = @mark_seq,
    mark_tokens = @mark_tokens,
    mark_tool_calls = @mark_tool_calls,
    rejected_updates = rejected_updates + @rejected,
    failed_updates = failed_updates + @failed,
    last_error = @last_error
WHERE tenant_id = @tenant_id AND session_id = @session_id AND update_owner = @owner AND update_lease_until IS NOT NULL;

-- name: NotesProgress :one
-- How far the notes have followed the session: the seq they looked at, the
-- session's applied seq, and whether an update runs now.
SELECT n.seen_seq, s.applied_seq, coalesce(n.update_lease_until > now(), false)::bool AS running
FROM session_notes n JOIN sessions s ON s.tenant_id = n.tenant_id AND s.session_id = n.session_id
WHERE n.tenant_id = @tenant_id AND n.session_id = @session_id;

-- name: NotesStaleClaims :many
-- Trailing runs whose claim ran out, across tenants, for the sweep: through
-- the owner's function.
SELECT tenant_id::text, session_id::text FROM mnemos_stale_notes_claims(@max_rows::integer);
