-- name: SessionLock :one
-- Creates the session when new and returns it locked until the transaction
-- ends, in one statement: ON CONFLICT DO UPDATE locks the existing row.
INSERT INTO sessions (tenant_id, session_id, agent_id) VALUES (@tenant_id, @session_id, @agent_id)
ON CONFLICT (tenant_id, session_id) DO UPDATE SET updated_at = sessions.updated_at
RETURNING *;

-- name: SessionLockWithin :one
-- SessionLock, waiting at most wait_ms for another transaction's lock
-- (lock_not_available past it).
SELECT * FROM mnemos_lock_session(@tenant_id::text, @session_id::text, @agent_id::text, @wait_ms::integer);

-- name: SessionsLockFree :many
-- Creates those of a batch's sessions that do not exist yet and may be
-- created (agent_ids and creates are parallel: a new session's agent, and
-- whether the batch may create it) and locks, in key order, the existing
-- ones no other transaction holds; returns both, locked until the
-- transaction ends. The ones another transaction holds are left out. (The
-- sessions created are the statement's own, so locked; held reads the
-- table as it was before them.)
WITH created AS (
    INSERT INTO sessions (tenant_id, session_id, agent_id)
    SELECT @tenant_id::text, u.session_id, u.agent_id
    FROM ROWS FROM (unnest(@session_ids::text[]), unnest(@agent_ids::text[]), unnest(@creates::boolean[])) AS u(session_id, agent_id, creates)
    WHERE u.creates
    ORDER BY 2
    ON CONFLICT (tenant_id, session_id) DO NOTHING
    RETURNING *
), held AS (
    SELECT * FROM sessions
    WHERE tenant_id = @tenant_id AND session_id = ANY(@session_ids::text[])
    ORDER BY session_id
    FOR UPDATE SKIP LOCKED
)
SELECT * FROM created
UNION ALL
SELECT * FROM held;

-- name: SessionProgress :one
-- What the gateway checks a turn against: one row by its key.
SELECT applied_seq, message_count FROM sessions WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: SessionGet :one
SELECT * FROM sessions WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: SessionUpdateAccounting :exec
-- Writes the accounting of the sessions the accountant locked, one or many
-- in one statement: the arrays are parallel, one session per index, each
-- named once. memory_scopes are JSON objects and auto_compact_seqs array
-- literals ('{3,9}'), as text.
UPDATE sessions s SET
    agent_id = u.agent_id,
    model = u.model,
    context_window = u.context_window,
    max_output_tokens = u.max_output_tokens,
    memory_scope = u.memory_scope::jsonb,
    applied_seq = u.applied_seq,
    waiting_turns = u.waiting_turns,
    message_count = u.message_count,
    message_bytes = u.message_bytes,
    baseline_tokens = u.baseline_tokens,
    has_usage = u.has_usage,
    pending_tokens = u.pending_tokens,
    estimate_factor = u.estimate_factor,
    dense_factor = u.dense_factor,
    pending_dense = u.pending_dense,
    prefix_tokens = u.prefix_tokens,
    prefix_hash = u.prefix_hash,
    token_count = u.token_count,
    state = u.state,
    compaction_in_flight = u.compaction_in_flight,
    compact_requests = u.compact_requests,
    auto_compact_seqs = u.auto_compact_seqs::bigint[],
    thrash_held = u.thrash_held,
    tool_calls_total = u.tool_calls_total,
    rejected_turns = u.rejected_turns,
    skipped_seqs = u.skipped_seqs,
    last_skipped_from = u.last_skipped_from,
    last_skipped_to = u.last_skipped_to,
    stale_usage_above = u.stale_usage_above,
    last_response_at = u.last_response_at,
    updated_at = now()
FROM ROWS FROM (unnest(@session_ids::text[]), unnest(@agent_ids::text[]), unnest(@models::text[]),
    unnest(@context_windows::bigint[]), unnest(@max_output_tokens::bigint[]), unnest(@memory_scopes::text[]),
    unnest(@applied_seqs::bigint[]), unnest(@waiting_turns::bigint[]), unnest(@message_counts::bigint[]),
    unnest(@message_bytes::bigint[]), unnest(@baseline_tokens::bigint[]), unnest(@has_usages::boolean[]),
    unnest(@pending_tokens::bigint[]), unnest(@estimate_factors::double precision[]),
    unnest(@dense_factors::double precision[]), unnest(@pending_denses::bigint[]),
    unnest(@prefix_tokens::bigint[]), unnest(@prefix_hashes::text[]), unnest(@token_counts::bigint[]),
    unnest(@states::text[]), unnest(@compactions_in_flight::boolean[]), unnest(@compact_requests::bigint[]),
    unnest(@auto_compact_seqs::text[]), unnest(@thrash_helds::bigint[]), unnest(@tool_calls_totals::bigint[]),
    unnest(@rejected_turns::bigint[]), unnest(@skipped_seqs::bigint[]), unnest(@last_skipped_froms::bigint[]),
    unnest(@last_skipped_tos::bigint[]), unnest(@stale_usage_aboves::bigint[]),
    unnest(@last_response_ats::timestamptz[]))
    AS u(session_id, agent_id, model, context_window, max_output_tokens, memory_scope, applied_seq, waiting_turns,
    message_count, message_bytes, baseline_tokens, has_usage, pending_tokens, estimate_factor, dense_factor,
    pending_dense, prefix_tokens, prefix_hash, token_count, state, compaction_in_flight, compact_requests,
    auto_compact_seqs, thrash_held, tool_calls_total, rejected_turns, skipped_seqs, last_skipped_from,
    last_skipped_to, stale_usage_above, last_response_at)
WHERE s.tenant_id = @tenant_id AND s.session_id = u.session_id;

-- name: SessionCountByState :many
-- Sessions per threshold state, across tenants, for the sessions gauge:
-- through the owner's function.
SELECT state::text, sessions::bigint FROM mnemos_sessions_by_state();

-- name: SessionSetAutoCompact :execrows
-- Turns the session's automatic compaction on or off.
UPDATE sessions SET auto_compact_enabled = @enabled, updated_at = now()
WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: SessionSetPins :execrows
-- Replaces the texts pinned to the session.
UPDATE sessions SET pins = @pins, updated_at = now()
WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: SessionList :many
-- A page of the tenant's sessions, newest first, strictly after the
-- (before_created_at, before_session_id) key (+infinity for the first
-- page), that match the filters: a state among states (all when empty),
-- updated after updated_after (-infinity: any), the agent (all when empty),
-- a memory_scope holding scope_filter (an empty object: any).
SELECT * FROM sessions
WHERE tenant_id = @tenant_id
  AND (created_at, session_id) < (@before_created_at::timestamptz, @before_session_id::text)
  AND (cardinality(@states::text[]) = 0 OR state = ANY(@states::text[]))
  AND updated_at > @updated_after::timestamptz
  AND (@agent_id::text = '' OR agent_id = @agent_id::text)
  AND memory_scope @> @scope_filter::jsonb
ORDER BY created_at DESC, session_id DESC
LIMIT @max_rows;

-- name: SessionListSorted :many
-- SessionList's page in another order, for the console: by size
-- (token_count) or by last activity (updated_at), largest or latest first,
-- then by id, strictly after the previous page's last (value, session_id).
-- Both values change as sessions move, so a page boundary may too; no
-- index serves these orders, and the tenant's sessions are sorted.
SELECT * FROM sessions
WHERE tenant_id = @tenant_id
  AND CASE @sort_by::text
        WHEN 'size' THEN (token_count, session_id) < (@before_tokens::bigint, @before_session_id::text)
        ELSE (updated_at, session_id) < (@before_updated_at::timestamptz, @before_session_id::text)
      END
  AND (cardinality(@states::text[]) = 0 OR state = ANY(@states::text[]))
  AND updated_at > @updated_after::timestamptz
  AND (@agent_id::text = '' OR agent_id = @agent_id::text)
  AND memory_scope @> @scope_filter::jsonb
ORDER BY CASE WHEN @sort_by::text = 'size' THEN token_count END DESC,
         CASE WHEN @sort_by::text <> 'size' THEN updated_at END DESC,
         session_id DESC
LIMIT @max_rows;

-- name: SessionProxyRound :exec
-- Records a round the Messages API proxy published: its seq, and how many
-- of the conversation's messages are published now.
UPDATE sessions SET proxy_seq = @proxy_seq, proxy_messages = @proxy_messages, updated_at = now()
WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: SessionProxyCostState :one
-- What the straight run's last request of a thread held, and when it was
-- priced, locking the thread's session for the round's price.
SELECT proxy_straight_input, proxy_priced_at FROM sessions
WHERE tenant_id = @tenant_id AND session_id = @session_id
FOR UPDATE;

-- name: SessionProxyCostAdd :exec
-- Adds a priced round to its thread's session.
UPDATE sessions SET proxy_priced_rounds = proxy_priced_rounds + 1,
    proxy_cost_nanousd = proxy_cost_nanousd + @cost_nanousd,
    proxy_straight_nanousd = proxy_straight_nanousd + @straight_nanousd,
    proxy_straight_input = @straight_input, proxy_priced_at = @priced_at
WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: SessionProxyCosts :many
-- The proxied rounds priced of the sessions named.
SELECT session_id, proxy_priced_rounds, proxy_cost_nanousd, proxy_straight_nanousd, proxy_priced_at
FROM sessions WHERE tenant_id = @tenant_id AND session_id = ANY(@session_ids::text[])
ORDER BY session_id;

-- name: SessionEstimatePrior :one
-- The tenant's prior for a new session's calibration: the mean factors
-- learnt among its 200 latest sessions, read from the sessions_created
-- index. The bound is on the sessions read, not on those that learnt: a
-- tenant whose sessions rarely learn (no usage reported) would otherwise
-- have every new session's first batch scan all of its sessions.
SELECT
    coalesce(avg(estimate_factor) FILTER (WHERE estimate_factor > 0), 0)::float8 AS prose,
    coalesce(avg(dense_factor) FILTER (WHERE dense_factor > 0), 0)::float8 AS dense
FROM (
    SELECT estimate_factor, dense_factor FROM sessions
    WHERE tenant_id = @tenant_id
    ORDER BY created_at DESC
    LIMIT 200
) latest;
