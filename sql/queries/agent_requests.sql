-- name: AgentRequestPut :exec
-- Keeps a session's last cached agent request, replacing the one before:
-- its body whole (pieces 0) or in pieces (AgentRequestPiecesPut).
INSERT INTO agent_requests (tenant_id, session_id, model, body, reply, beta, pieces)
VALUES (@tenant_id, @session_id, @model, @body, @reply, @beta, @pieces)
ON CONFLICT (tenant_id, session_id) DO UPDATE SET
    model = excluded.model, body = excluded.body, reply = excluded.reply,
    beta = excluded.beta, pieces = excluded.pieces, updated_at = now();

-- name: AgentRequestPiecesPut :exec
-- Writes the pieces of a session's agent request that changed.
INSERT INTO agent_request_pieces (tenant_id, session_id, idx, digest, body)
SELECT @tenant_id::text, @session_id::text, p.idx, p.digest, p.body
FROM ROWS FROM (unnest(@idxs::integer[]), unnest(@digests::bytea[]), unnest(@bodies::bytea[])) AS p(idx, digest, body)
ON CONFLICT (tenant_id, session_id, idx) DO UPDATE SET digest = excluded.digest, body = excluded.body;

-- name: AgentRequestPiecesTrim :exec
-- Drops the pieces past a shorter request's last.
DELETE FROM agent_request_pieces
WHERE tenant_id = @tenant_id AND session_id = @session_id AND idx >= @pieces::integer;

-- name: AgentRequestDigests :many
-- The digests of a session's stored pieces, by index, for the next round
-- to write only what changed.
SELECT idx, digest FROM agent_request_pieces
WHERE tenant_id = @tenant_id AND session_id = @session_id
ORDER BY idx;

-- name: AgentRequestGet :one
-- A request stored in pieces is joined from them in one pass, with how
-- many were there to join.
SELECT r.model,
    (CASE WHEN r.pieces = 0 THEN r.body ELSE COALESCE(p.joined, ''::bytea) END)::bytea AS body,
    (CASE WHEN r.pieces = 0 THEN 0 ELSE p.found END)::integer AS pieces_found,
    r.pieces, r.reply, r.beta, r.updated_at
FROM agent_requests r
CROSS JOIN LATERAL (
    SELECT string_agg(p.body, ''::bytea ORDER BY p.idx) AS joined, count(*) AS found
    FROM agent_request_pieces p
    WHERE p.tenant_id = r.tenant_id AND p.session_id = r.session_id AND p.idx < r.pieces
) p
WHERE r.tenant_id = @tenant_id AND r.session_id = @session_id;
