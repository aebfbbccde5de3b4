-- name: ContextSize :one
-- What rendering a session's context reads: the messages from its kept
-- point on, how many and how large. A message counts the larger of its
-- stored size and four bytes per estimated token, since a large value is
-- stored compressed.
SELECT count(m.uuid)::bigint AS messages,
       coalesce(sum(greatest(pg_column_size(m.content)::bigint, 4 * m.estimate_tokens)), 0)::bigint AS bytes
FROM sessions s
JOIN messages m ON m.tenant_id = s.tenant_id AND m.session_id = s.session_id AND m.position >= s.keep_from
WHERE s.tenant_id = @tenant_id AND s.session_id = @session_id;
