-- name: AgentRequestPut :exec
-- Keeps a session's last cached agent request, replacing the one before.
INSERT INTO agent_requests (tenant_id, session_id, model, body, reply, beta)
VALUES (@tenant_id, @session_id, @model, @body, @reply, @beta)
ON CONFLICT (tenant_id, session_id) DO UPDATE SET
    model = excluded.model, body = excluded.body, reply = excluded.reply,
    beta = excluded.beta, updated_at = now();

-- name: AgentRequestGet :one
SELECT model, body, reply, beta, updated_at FROM agent_requests
WHERE tenant_id = @tenant_id AND session_id = @session_id;
