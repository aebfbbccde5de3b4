-- name: ToolResultInsert :exec
INSERT INTO tool_results (tenant_id, id, session_id, message_uuid, tool_use_id, content, size_chars)
VALUES (@tenant_id, @id, @session_id, @message_uuid, @tool_use_id, @content, @size_chars)
ON CONFLICT DO NOTHING;

-- name: ToolResultGet :one
SELECT * FROM tool_results WHERE tenant_id = @tenant_id AND id = @id;

-- name: ReplacementsFor :many
-- One primary-key probe per tool use id (see MessageHashes).
SELECT r.* FROM unnest(@tool_use_ids::text[]) AS u(id)
CROSS JOIN LATERAL (
    SELECT * FROM content_replacements c
    WHERE c.tenant_id = @tenant_id AND c.session_id = @session_id AND c.tool_use_id = u.id AND c.kind = @kind
    LIMIT 1
) r;

-- name: ReplacementsForSessions :many
-- ReplacementsFor the turns of many sessions at once: session_ids and
-- tool_use_ids are parallel, one probe per pair.
SELECT r.* FROM ROWS FROM (unnest(@session_ids::text[]), unnest(@tool_use_ids::text[])) AS u(session_id, tool_use_id)
CROSS JOIN LATERAL (
    SELECT * FROM content_replacements c
    WHERE c.tenant_id = @tenant_id AND c.session_id = u.session_id AND c.tool_use_id = u.tool_use_id AND c.kind = @kind
    LIMIT 1
) r;

-- name: ReplacementInsert :exec
INSERT INTO content_replacements (tenant_id, session_id, tool_use_id, kind, tool_result_id, replacement)
VALUES (@tenant_id, @session_id, @tool_use_id, @kind, @tool_result_id, @replacement)
ON CONFLICT DO NOTHING;

-- name: ReplacementListBySession :many
SELECT * FROM content_replacements
WHERE tenant_id = @tenant_id AND session_id = @session_id
ORDER BY decided_at, tool_use_id;

-- name: ReplacementsOfKind :many
SELECT * FROM content_replacements
WHERE tenant_id = @tenant_id AND session_id = @session_id AND kind = @kind
ORDER BY decided_at, tool_use_id;

-- name: ReplacementsOfKinds :many
-- The decisions a context is rendered with, every kind in one read.
SELECT * FROM content_replacements
WHERE tenant_id = @tenant_id AND session_id = @session_id AND kind = ANY(@kinds::text[])
ORDER BY decided_at, tool_use_id;
