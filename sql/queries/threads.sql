-- name: ProxyPathHits :many
-- Where the request's chained digests stand in the threads' paths, the
-- furthest first: the longest prefix a thread holds, and any other
-- thread holding a prefix as long (at most @max_rows rows). One index
-- probe per digest.
SELECT thread_id, position
FROM proxy_paths
WHERE tenant_id = @tenant_id AND digest = ANY(@digests::bytea[])
ORDER BY position DESC, thread_id
LIMIT @max_rows;

-- name: ProxyThreadsBySession :many
-- The threads of a client's session, oldest first, each with how many of
-- the conversation's messages it holds and when it was last written (its
-- session's).
SELECT t.thread_id, t.agent_id, t.kind, t.parent_thread, t.fork_position,
       s.proxy_messages AS length, t.created_at, s.updated_at
FROM proxy_threads t
JOIN sessions s ON s.tenant_id = t.tenant_id AND s.session_id = t.thread_id
WHERE t.tenant_id = @tenant_id AND t.session_id = @session_id
ORDER BY t.created_at, t.thread_id;

-- name: ProxyThreadPut :exec
-- Creates a thread with its first round.
INSERT INTO proxy_threads (tenant_id, session_id, thread_id, agent_id, kind, parent_thread, fork_position)
VALUES (@tenant_id, @session_id, @thread_id, @agent_id, @kind, sqlc.narg('parent_thread'), sqlc.narg('fork_position'))
ON CONFLICT (tenant_id, thread_id) DO NOTHING;

-- name: ProxyPathPut :exec
-- Adds a thread's messages from the first position given on.
INSERT INTO proxy_paths (tenant_id, thread_id, position, digest)
SELECT @tenant_id, @thread_id, unnest(@positions::bigint[]), unnest(@digests::bytea[])
ON CONFLICT (tenant_id, thread_id, position) DO NOTHING;

-- name: ProxyPathLast :one
-- A thread's last message: its position and chained digest.
SELECT position, digest FROM proxy_paths
WHERE tenant_id = @tenant_id AND thread_id = @thread_id
ORDER BY position DESC
LIMIT 1;
