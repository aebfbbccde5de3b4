-- name: DreamCandidateList :many
-- The scopes of every tenant that hold live memories, with their dream
-- state, in key order after (after_tenant, after_scope): the dreamer's scan
-- pages through them. The only read across tenants the dreamer makes,
-- through the owner's function.
SELECT tenant_id::text, scope::text, last_consolidated_at::timestamptz, last_scan_at::timestamptz
FROM mnemos_dream_candidates(@after_tenant::text, @after_scope::text, @max_rows::integer);

-- name: DreamScopeClaimScan :execrows
-- Takes the scope's scan slot: records that its sessions are counted now,
-- unless they were counted after scanned_after (1 row: taken).
INSERT INTO dream_scopes (tenant_id, scope, last_scan_at) VALUES (@tenant_id, @scope, @now)
ON CONFLICT (tenant_id, scope) DO UPDATE SET last_scan_at = excluded.last_scan_at
WHERE dream_scopes.last_scan_at IS NULL OR dream_scopes.last_scan_at <= @scanned_after;

-- name: SessionCountTouchingScope :one
-- How many sessions naming a scope were updated after since, counting no
-- further than at_most.
SELECT count(*)::bigint FROM (
    SELECT 1 FROM sessions
    WHERE tenant_id = @tenant_id AND memory_scope @> @scope_filter::jsonb AND updated_at > @since
    LIMIT @at_most
) touched;

-- name: DreamScopeLock :one
-- Returns the scope's dream state locked until the transaction ends,
-- creating it first.
INSERT INTO dream_scopes (tenant_id, scope) VALUES (@tenant_id, @scope)
ON CONFLICT (tenant_id, scope) DO UPDATE SET lease_holder = dream_scopes.lease_holder
RETURNING *;

-- name: DreamScopeGet :one
SELECT * FROM dream_scopes WHERE tenant_id = @tenant_id AND scope = @scope;

-- name: DreamScopeSetLease :exec
UPDATE dream_scopes SET lease_holder = @holder, lease_dream_id = @dream_id, lease_taken_at = @taken_at, lease_expires_at = @expires_at
WHERE tenant_id = @tenant_id AND scope = @scope;

-- name: DreamScopeRenewLease :execrows
-- Extends the lease of a dream that still holds it (0 rows: it does not).
UPDATE dream_scopes SET lease_expires_at = @expires_at
WHERE tenant_id = @tenant_id AND scope = @scope AND lease_dream_id = @dream_id AND lease_holder <> '';

-- name: DreamScopeReleaseLease :execrows
UPDATE dream_scopes SET lease_holder = '', lease_dream_id = '', lease_taken_at = NULL, lease_expires_at = NULL
WHERE tenant_id = @tenant_id AND scope = @scope AND lease_dream_id = @dream_id;

-- name: DreamScopeSetConsolidated :exec
UPDATE dream_scopes SET last_consolidated_at = @at WHERE tenant_id = @tenant_id AND scope = @scope;

-- name: DreamInsert :exec
INSERT INTO dreams (tenant_id, dream_id, scope, trigger, status, holder, started_at, created_at)
VALUES (@tenant_id, @dream_id, @scope, @trigger, @status, @holder, sqlc.narg('started_at'), @created_at);

-- name: DreamGet :one
SELECT * FROM dreams WHERE tenant_id = @tenant_id AND dream_id = @dream_id;

-- name: DreamGetForUpdate :one
SELECT * FROM dreams WHERE tenant_id = @tenant_id AND dream_id = @dream_id FOR UPDATE;

-- name: DreamListByScope :many
SELECT * FROM dreams WHERE tenant_id = @tenant_id AND scope = @scope
ORDER BY created_at DESC, dream_id
LIMIT @max_rows;

-- name: DreamStart :execrows
-- A requested dream starts running under holder.
UPDATE dreams SET status = 'running', holder = @holder, started_at = @started_at
WHERE tenant_id = @tenant_id AND dream_id = @dream_id AND status = 'requested';

-- name: DreamMarkUpdating :execrows
-- Records a running dream's first write (1 row: it was the first).
UPDATE dreams SET updating_at = @at
WHERE tenant_id = @tenant_id AND dream_id = @dream_id AND status = 'running' AND updating_at IS NULL;

-- name: DreamFinish :execrows
-- Ends a dream that is running (or requested) with its outcome.
UPDATE dreams SET
    status = @status,
    llm_provider = @llm_provider,
    llm_model = @llm_model,
    turns = @turns,
    tool_calls = @tool_calls,
    tool_errors = @tool_errors,
    input_tokens = @input_tokens,
    output_tokens = @output_tokens,
    memories_live = @memories_live,
    changes_allowed = @changes_allowed,
    changes_destructive = @changes_destructive,
    written = @written,
    deleted = @deleted,
    proposal = sqlc.narg('proposal'),
    summary = @summary,
    error = @error,
    finished_at = @finished_at
WHERE tenant_id = @tenant_id AND dream_id = @dream_id AND status IN ('requested', 'running');

-- name: DreamRequestKill :execrows
-- Asks a running dream to stop (its run sees it at its next check).
UPDATE dreams SET kill_requested_at = coalesce(kill_requested_at, @at)
WHERE tenant_id = @tenant_id AND dream_id = @dream_id AND status = 'running';

-- name: DreamSetApproved :execrows
UPDATE dreams SET status = 'approved', approved_at = @at
WHERE tenant_id = @tenant_id AND dream_id = @dream_id AND status = 'proposed';

-- name: DreamReject :execrows
-- Ends a proposal without applying it: an operator rejected it. It ends
-- killed (nothing applied), with the reason as its error.
UPDATE dreams SET status = 'killed', error = @reason, finished_at = coalesce(finished_at, @at)
WHERE tenant_id = @tenant_id AND dream_id = @dream_id AND status = 'proposed';

-- name: DreamSupersedeProposals :many
-- A newer dream of the scope makes its earlier proposals moot.
UPDATE dreams SET status = 'superseded', finished_at = coalesce(finished_at, @at)
WHERE tenant_id = @tenant_id AND scope = @scope AND status = 'proposed' AND dream_id <> @dream_id
RETURNING dream_id;

-- name: MessageSearch :many
-- Messages of the sessions naming a scope whose text matches a web-search
-- style query, newest first, each with a short snippet around the match.
SELECT m.session_id, m.position, m.role, m.created_at,
       ts_headline('simple', left(message_text(m.content), 20000), websearch_to_tsquery('simple', @query::text), @headline_options::text)::text AS snippet
FROM messages m
JOIN sessions s ON s.tenant_id = m.tenant_id AND s.session_id = m.session_id
WHERE m.tenant_id = @tenant_id
  AND s.memory_scope @> @scope_filter::jsonb
  AND message_search(m.content) @@ websearch_to_tsquery('simple', @query::text)
ORDER BY m.created_at DESC, m.session_id, m.position DESC
LIMIT @max_rows;

-- name: SearchQueryTerms :one
-- The terms a search query holds once parsed ('' when none).
SELECT querytree(websearch_to_tsquery('simple', @query::text))::text;
