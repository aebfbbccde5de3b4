-- name: ContextSize :one
-- What rendering a session's context reads: the messages from its kept
-- point on, how many and how large, from two rows found by index (the last
-- message, and the one before the kept point), whatever the session holds.
-- Positions have no holes. A message's size is the larger of its content's
-- size and four bytes per estimated token (messages.bytes_through).
SELECT CASE WHEN last.position >= s.keep_from THEN last.position + 1 - s.keep_from ELSE 0 END::bigint AS messages,
       CASE WHEN last.position >= s.keep_from THEN last.bytes_through - coalesce(before.bytes_through, 0) ELSE 0 END::bigint AS bytes
FROM sessions s
LEFT JOIN LATERAL (
    SELECT m.position, m.bytes_through FROM messages m
    WHERE m.tenant_id = s.tenant_id AND m.session_id = s.session_id
    ORDER BY m.position DESC LIMIT 1
) last ON true
LEFT JOIN LATERAL (
    SELECT m.bytes_through FROM messages m
    WHERE m.tenant_id = s.tenant_id AND m.session_id = s.session_id AND m.position = s.keep_from - 1
) before ON true
WHERE s.tenant_id = @tenant_id AND s.session_id = @session_id;
