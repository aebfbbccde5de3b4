-- name: MessageGetHash :one
SELECT content_hash FROM messages
WHERE tenant_id = @tenant_id AND session_id = @session_id AND uuid = @uuid;

-- name: MessageInsert :exec
INSERT INTO messages (tenant_id, session_id, uuid, position, seq, role, content, content_hash, estimate_tokens, is_response, stop_reason)
VALUES (@tenant_id, @session_id, @uuid, @position, @seq, @role, @content, @content_hash, @estimate_tokens, @is_response, @stop_reason);

-- name: MessageListBySession :many
SELECT * FROM messages
WHERE tenant_id = @tenant_id AND session_id = @session_id
ORDER BY position;

-- name: MessageCountBySession :one
SELECT count(*) FROM messages WHERE tenant_id = @tenant_id AND session_id = @session_id;
