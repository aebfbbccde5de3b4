-- name: CompactionInsert :one
-- Creates a compaction request. An auto request the accountant already made
-- (same request number) returns the existing row instead.
INSERT INTO compactions (tenant_id, id, session_id, request, trigger, direction, pivot_uuid, instructions)
VALUES (@tenant_id, @id, @session_id, sqlc.narg('request'), @trigger, @direction, @pivot_uuid, @instructions)
ON CONFLICT (tenant_id, session_id, request) WHERE request IS NOT NULL
DO UPDATE SET request = compactions.request
RETURNING *;

-- name: CompactionGet :one
SELECT * FROM compactions WHERE tenant_id = @tenant_id AND id = @id;

-- name: CompactionOfSession :one
-- The compaction the session's context starts from, read with no other
-- round trip for the session's row (a context read ahead).
SELECT * FROM compactions
WHERE compactions.tenant_id = @tenant_id
  AND compactions.id = (SELECT s.compaction_id FROM sessions s WHERE s.tenant_id = @tenant_id AND s.session_id = @session_id);

-- name: CompactionListBySession :many
SELECT * FROM compactions WHERE tenant_id = @tenant_id AND session_id = @session_id ORDER BY created_at, id;

-- name: CompactionExpireStale :exec
-- Gives up compactions of the session whose worker stopped renewing its lease.
UPDATE compactions SET status = 'failed', error = 'lease expired', finished_at = now(), lease_until = NULL
WHERE tenant_id = @tenant_id AND session_id = @session_id AND status = 'running' AND lease_until < now() AND id <> @id;

-- name: CompactionStart :one
-- Takes a requested compaction (or one whose lease expired) to run until
-- lease_until. The unique index on running compactions refuses a second
-- running compaction of the same session.
UPDATE compactions SET status = 'running', lease_until = @lease_until, started_at = now()
WHERE tenant_id = @tenant_id AND id = @id
  AND (status = 'requested' OR (status = 'running' AND lease_until < now()))
RETURNING *;

-- name: CompactionRenew :execrows
UPDATE compactions SET lease_until = @lease_until
WHERE tenant_id = @tenant_id AND id = @id AND status = 'running';

-- name: CompactionComplete :execrows
UPDATE compactions SET
    status = 'completed', lease_until = NULL, finished_at = now(),
    method = @method, pre_tokens = @pre_tokens, post_tokens = @post_tokens,
    through_position = @through_position, keep_from = @keep_from, head = @head, summary = @summary,
    llm_calls = @llm_calls, llm_retries = @llm_retries, llm_model = @llm_model,
    input_tokens = @input_tokens, output_tokens = @output_tokens,
    cache_read_tokens = @cache_read_tokens, cache_write_tokens = @cache_write_tokens,
    error = @error, retention = @retention, retention_detail = @retention_detail
WHERE tenant_id = @tenant_id AND id = @id AND status = 'running';

-- name: CompactionEnd :execrows
-- Ends a compaction that did not complete: failed, or skipped because it was
-- no longer needed.
UPDATE compactions SET status = @status, lease_until = NULL, finished_at = now(), error = @error,
    llm_calls = @llm_calls, llm_retries = @llm_retries, pre_tokens = @pre_tokens
WHERE tenant_id = @tenant_id AND id = @id AND status IN ('requested', 'running');

-- name: SessionApplyCompaction :exec
UPDATE sessions SET
    compaction_id = @compaction_id,
    keep_from = @keep_from,
    baseline_tokens = @baseline_tokens,
    has_usage = true,
    pending_tokens = @pending_tokens,
    pending_dense = 0,
    token_count = @token_count,
    state = @state,
    compaction_in_flight = false,
    compact_failures = @compact_failures,
    compact_circuit_open = @compact_circuit_open,
    compact_circuit_until = sqlc.narg(compact_circuit_until),
    stale_usage_above = @stale_usage_above,
    context_epoch = context_epoch + 1,
    updated_at = now()
WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: SessionCompactionEnded :exec
-- A compaction ended without changing the context.
UPDATE sessions SET
    compaction_in_flight = false,
    compact_failures = @compact_failures,
    compact_circuit_open = @compact_circuit_open,
    updated_at = now()
WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: SessionMarkCompactionRequested :exec
UPDATE sessions SET compaction_in_flight = true, updated_at = now()
WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: SessionAddContextBreak :exec
-- Records micro-compaction decisions' effect: a cache break, and the tokens
-- they took out of the count. A response to a request sent before the break
-- measured what they took out: usage at or above the midpoint between the
-- counts before and after it is stale, as after a compaction.
UPDATE sessions SET
    context_epoch = context_epoch + 1,
    baseline_tokens = greatest(baseline_tokens - @saved, 0),
    pending_tokens = CASE WHEN has_usage THEN pending_tokens ELSE greatest(pending_tokens - @saved, 0) END,
    stale_usage_above = CASE WHEN sqlc.arg(saved) > 0 THEN sqlc.arg(token_count) + sqlc.arg(saved) / 2 ELSE stale_usage_above END,
    token_count = @token_count,
    state = @state,
    updated_at = now()
WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: ContextSnapshotGet :one
SELECT * FROM context_snapshots WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: ContextSnapshotPut :exec
INSERT INTO context_snapshots (tenant_id, session_id, epoch, prefix_len, prefix_hash, assembled_at)
VALUES (@tenant_id, @session_id, @epoch, @prefix_len, @prefix_hash, now())
ON CONFLICT (tenant_id, session_id) DO UPDATE SET
    epoch = excluded.epoch, prefix_len = excluded.prefix_len,
    prefix_hash = excluded.prefix_hash, assembled_at = excluded.assembled_at;

-- name: LLMUsageAdd :exec
INSERT INTO llm_usage (tenant_id, day, task, provider, model, calls, failed_calls,
    input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_nanousd, straight_nanousd)
VALUES (@tenant_id, @day, @task, @provider, @model, 1, @failed,
    @input_tokens, @output_tokens, @cache_read_tokens, @cache_write_tokens, @cost_nanousd, @straight_nanousd)
ON CONFLICT (tenant_id, day, task, provider, model) DO UPDATE SET
    calls = llm_usage.calls + 1,
    failed_calls = llm_usage.failed_calls + excluded.failed_calls,
    input_tokens = llm_usage.input_tokens + excluded.input_tokens,
    output_tokens = llm_usage.output_tokens + excluded.output_tokens,
    cache_read_tokens = llm_usage.cache_read_tokens + excluded.cache_read_tokens,
    cache_write_tokens = llm_usage.cache_write_tokens + excluded.cache_write_tokens,
    cost_nanousd = llm_usage.cost_nanousd + excluded.cost_nanousd,
    straight_nanousd = llm_usage.straight_nanousd + excluded.straight_nanousd;

-- name: LLMUsageOnDay :one
-- The day's tokens of Mnemos's own calls (the agent's proxied rounds,
-- task 'proxy', are not in the token budget) and the cost of every call,
-- the agent's rounds included.
SELECT coalesce(sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens) FILTER (WHERE task <> 'proxy'), 0)::bigint AS tokens,
    coalesce(sum(cost_nanousd), 0)::bigint AS cost_nanousd
FROM llm_usage WHERE tenant_id = @tenant_id AND day = @day;

-- name: LLMUsageList :many
SELECT * FROM llm_usage WHERE tenant_id = @tenant_id ORDER BY day, task, provider, model;

-- name: LLMUsageBetween :many
SELECT * FROM llm_usage WHERE tenant_id = @tenant_id AND day BETWEEN @from_day AND @to_day
ORDER BY day, task, provider, model;

-- name: CompactionRelease :exec
-- Gives a running compaction back, to be taken again by the next delivery.
UPDATE compactions SET status = 'requested', lease_until = NULL
WHERE tenant_id = @tenant_id AND id = @id AND status = 'running';

-- name: SessionRequestAutoCompaction :one
-- Asks for the session's next automatic compaction unless one is in
-- flight: it marks it in flight, numbers the request and records the turn
-- that asked (the thrash guard's window). No row: one is in flight.
UPDATE sessions SET
    compaction_in_flight = true,
    compact_requests = compact_requests + 1,
    auto_compact_seqs = @auto_compact_seqs,
    updated_at = now()
WHERE tenant_id = @tenant_id AND session_id = @session_id AND NOT compaction_in_flight
RETURNING compact_requests;

-- name: CompactionUnfinished :one
-- The session's latest compaction not ended yet (requested or running).
SELECT * FROM compactions
WHERE tenant_id = @tenant_id AND session_id = @session_id AND status IN ('requested', 'running')
ORDER BY created_at DESC, id DESC LIMIT 1;

-- name: CompactionLatest :one
-- The session's latest compaction, whatever its status.
SELECT * FROM compactions
WHERE tenant_id = @tenant_id AND session_id = @session_id
ORDER BY created_at DESC, id DESC LIMIT 1;
