-- Retention (pkg/retain): each statement removes at most @max_rows rows
-- that are due, skipping rows another transaction holds, and reports how
-- many it removed.

-- name: RetentionTenants :many
-- The tenants whose settings name a retention section, across tenants.
SELECT tenant_id::text FROM mnemos_retention_tenants();

-- name: RetentionIdleSessions :many
-- Sessions without activity since before, oldest first, found through
-- sessions_created (an idle session was created before its cutoff too).
-- A proxy thread goes with its client's session, which is erased only when
-- every thread of it is idle too.
SELECT s.session_id FROM sessions s
WHERE s.tenant_id = @tenant_id AND s.created_at < @before AND s.updated_at < @before
  AND NOT EXISTS (SELECT 1 FROM proxy_threads p
                  WHERE p.tenant_id = s.tenant_id AND p.thread_id = s.session_id AND p.session_id <> s.session_id)
  AND NOT EXISTS (SELECT 1 FROM proxy_threads p JOIN sessions t ON t.tenant_id = p.tenant_id AND t.session_id = p.thread_id
                  WHERE p.tenant_id = s.tenant_id AND p.session_id = s.session_id AND t.updated_at >= @before)
ORDER BY s.created_at
LIMIT @max_rows;

-- name: RetentionSessionStillIdle :one
-- Locks the session's row while its erasure is recorded, so a turn that
-- arrives meanwhile either comes first (and the session is not idle) or
-- waits and finds the erasure.
SELECT updated_at < @before AS idle FROM sessions WHERE tenant_id = @tenant_id AND session_id = @session_id FOR UPDATE;

-- name: RetentionDeleteToolResults :execrows
DELETE FROM tool_results d WHERE d.tenant_id = @tenant_id AND d.id IN (
    SELECT x.id FROM tool_results x WHERE x.tenant_id = @tenant_id AND x.created_at < @before
    ORDER BY x.created_at LIMIT @max_rows FOR UPDATE SKIP LOCKED);

-- name: RetentionDeleteMemoryRevisions :execrows
-- A memory's revisions are numbered 1, 2, … and memories.revision is the
-- live one: those above it minus keep (at least the live one) stay.
DELETE FROM memory_revisions d WHERE d.tenant_id = @tenant_id AND (d.scope, d.name, d.revision) IN (
    SELECT r.scope, r.name, r.revision FROM memory_revisions r
    JOIN memories m ON m.tenant_id = r.tenant_id AND m.scope = r.scope AND m.name = r.name
    WHERE r.tenant_id = @tenant_id AND r.created_at < @before
      AND r.revision <= m.revision - greatest(@keep::bigint, 1)
    LIMIT @max_rows FOR UPDATE OF r SKIP LOCKED);

-- name: ToolResultOffloaded :one
-- Whether the tenant's tool result id was ever offloaded (its replacement
-- names it), for an id no longer stored.
SELECT EXISTS (SELECT 1 FROM content_replacements WHERE tenant_id = @tenant_id AND tool_result_id = @id::text);
