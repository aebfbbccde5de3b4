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
-- The threads of a client's session, oldest first.
SELECT thread_id, agent_id, kind, parent_thread, fork_position, length, created_at, updated_at
FROM proxy_threads
WHERE tenant_id = @tenant_id AND session_id = @session_id
ORDER BY created_at, thread_id;

-- name: ProxyThreadPut :exec
-- Records a thread's round: the thread is created with its first one, and
-- its length follows its path.
INSERT INTO proxy_threads (tenant_id, session_id, thread_id, agent_id, kind, parent_thread, fork_position, length)
VALUES (@tenant_id, @session_id, @thread_id, @agent_id, @kind, sqlc.narg('parent_thread'), sqlc.narg('fork_position'), @length)
ON CONFLICT (tenant_id, thread_id) DO UPDATE SET length = GREATEST(proxy_threads.length, EXCLUDED.length), updated_at = now();

-- name: ProxyPathPut :exec
-- Adds a thread's messages from the first position given on.
INSERT INTO proxy_paths (tenant_id, thread_id, position, digest)
SELECT @tenant_id, @thread_id, unnest(@positions::bigint[]), unnest(@digests::bytea[])
ON CONFLICT (tenant_id, thread_id, position) DO UPDATE SET digest = EXCLUDED.digest;

-- name: ProxyPathLast :one
-- A thread's last message: its position and chained digest.
SELECT position, digest FROM proxy_paths
WHERE tenant_id = @tenant_id AND thread_id = @thread_id
ORDER BY position DESC
LIMIT 1;
