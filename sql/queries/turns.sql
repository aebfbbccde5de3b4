-- name: TurnInsert :one
-- Records a received event; returns nothing when the event_id is known already.
INSERT INTO turns (tenant_id, session_id, event_id, seq, status, payload)
VALUES (@tenant_id, @session_id, @event_id, @seq, @status, @payload)
ON CONFLICT DO NOTHING
RETURNING seq;

-- name: TurnGet :one
SELECT * FROM turns WHERE tenant_id = @tenant_id AND event_id = @event_id;

-- name: TurnGetBySeq :one
SELECT * FROM turns WHERE tenant_id = @tenant_id AND session_id = @session_id AND seq = @seq;

-- name: TurnNextPending :one
SELECT * FROM turns
WHERE tenant_id = @tenant_id AND session_id = @session_id AND status = 'pending'
ORDER BY seq LIMIT 1;

-- name: TurnRecordApplied :exec
-- Records an event applied on arrival, never kept waiting.
INSERT INTO turns (tenant_id, session_id, event_id, seq, status, reason, token_count, state, applied_at)
VALUES (@tenant_id, @session_id, @event_id, @seq, @status, @reason, @token_count, @state, now());

-- name: TurnRecordAppliedMany :exec
-- TurnRecordApplied for the turns of a batch in one statement: the arrays
-- are parallel.
INSERT INTO turns (tenant_id, session_id, event_id, seq, status, reason, token_count, state, applied_at)
SELECT @tenant_id::text, u.session_id, u.event_id, u.seq, @status::text, '', u.token_count, u.state, now()
FROM ROWS FROM (unnest(@session_ids::text[]), unnest(@event_ids::text[]), unnest(@seqs::bigint[]), unnest(@token_counts::bigint[]), unnest(@states::text[]))
    AS u(session_id, event_id, seq, token_count, state);

-- name: TurnFinish :exec
UPDATE turns SET status = @status, reason = @reason, payload = NULL,
    token_count = @token_count, state = @state, applied_at = now()
WHERE tenant_id = @tenant_id AND event_id = @event_id;

-- name: TurnStalledSessions :many
-- Sessions whose oldest waiting event has waited longer than the gap
-- timeout, across tenants: through the owner's function.
SELECT tenant_id::text, session_id::text FROM mnemos_stalled_sessions(@before::timestamptz, @max_rows::integer);

-- name: TurnAppliedAfter :many
-- At most max_rows of a session's applied turns after a seq, in seq order,
-- with the count each left: a session's history read a page at a time, and
-- (after seq 0) the points of the console's token chart.
SELECT seq, event_id, token_count, state, applied_at FROM turns
WHERE tenant_id = @tenant_id AND session_id = @session_id AND status = 'applied' AND seq > @after_seq
ORDER BY seq LIMIT @max_rows;
