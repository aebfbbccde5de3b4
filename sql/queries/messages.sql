-- name: MessageHashes :many
-- The content hashes of those of the given uuids the session has already:
-- one primary-key probe per uuid, whatever the session holds. (The LIMIT
-- keeps the planner from turning the probes into a join that reads the
-- whole session; `uuid = ANY(array)` could become a scan comparing every
-- stored row with every uuid.)
SELECT u.uuid::text AS uuid, m.content_hash
FROM unnest(@uuids::text[]) AS u(uuid)
CROSS JOIN LATERAL (
    SELECT content_hash FROM messages
    WHERE tenant_id = @tenant_id AND session_id = @session_id AND messages.uuid = u.uuid
    LIMIT 1
) m;

-- name: MessageHashesOfSessions :many
-- MessageHashes for the turns of many sessions at once: session_ids and
-- uuids are parallel, one probe per pair. (Parallel arrays are read side by
-- side with ROWS FROM, in one pass each: reading element i by subscript
-- walks an array of text from its start, which costs n²/2 steps over a
-- statement, seconds for a turn of 10,000 messages.)
SELECT u.session_id::text AS session_id, u.uuid::text AS uuid, m.content_hash
FROM ROWS FROM (unnest(@session_ids::text[]), unnest(@uuids::text[])) AS u(session_id, uuid)
CROSS JOIN LATERAL (
    SELECT content_hash FROM messages
    WHERE tenant_id = @tenant_id AND messages.session_id = u.session_id AND messages.uuid = u.uuid
    LIMIT 1
) m;

-- name: MessageInsert :execrows
-- Inserts a message unless the session has its uuid already (0 rows then).
INSERT INTO messages (tenant_id, session_id, uuid, position, seq, role, content, content_hash, estimate_tokens, is_response, stop_reason, bytes_through)
VALUES (@tenant_id, @session_id, @uuid, @position, @seq, @role, @content, @content_hash, @estimate_tokens, @is_response, @stop_reason, @bytes_through)
ON CONFLICT (tenant_id, session_id, uuid) DO NOTHING;

-- name: MessageInsertMany :exec
-- MessageInsert for the messages of a batch of turns in one statement: the
-- arrays are parallel, one message per index, read side by side.
INSERT INTO messages (tenant_id, session_id, uuid, position, seq, role, content, content_hash, estimate_tokens, is_response, stop_reason, bytes_through)
SELECT @tenant_id::text, u.session_id, u.uuid, u.position, u.seq, u.role, u.content::jsonb, u.content_hash, u.estimate_tokens, u.is_response,
    u.stop_reason, u.bytes_through
FROM ROWS FROM (unnest(@session_ids::text[]), unnest(@uuids::text[]), unnest(@positions::bigint[]), unnest(@seqs::bigint[]),
    unnest(@roles::text[]), unnest(@contents::text[]), unnest(@content_hashes::bytea[]), unnest(@estimates::bigint[]),
    unnest(@is_responses::boolean[]), unnest(@stop_reasons::text[]), unnest(@bytes_through::bigint[]))
    AS u(session_id, uuid, position, seq, role, content, content_hash, estimate_tokens, is_response, stop_reason, bytes_through)
ON CONFLICT (tenant_id, session_id, uuid) DO NOTHING;

-- name: MessageListBySession :many
SELECT * FROM messages
WHERE tenant_id = @tenant_id AND session_id = @session_id
ORDER BY position;

-- name: MessageCountBySession :one
SELECT count(*) FROM messages WHERE tenant_id = @tenant_id AND session_id = @session_id;

-- name: MessageListFrom :many
-- The session's messages from a position on, in order.
SELECT * FROM messages
WHERE tenant_id = @tenant_id AND session_id = @session_id AND position >= @from_position
ORDER BY position;

-- name: MessageTokensAfter :one
-- The estimate of the session's messages after a position.
SELECT coalesce(sum(estimate_tokens), 0)::bigint FROM messages
WHERE tenant_id = @tenant_id AND session_id = @session_id AND position > @after_position;

-- name: MessagePage :many
-- At most max_rows of the session's messages from a position on, in order:
-- a large session read a page at a time.
SELECT * FROM messages
WHERE tenant_id = @tenant_id AND session_id = @session_id AND position >= @from_position
ORDER BY position
LIMIT @max_rows;

-- name: MessageSearchSession :many
-- One session's messages whose text matches a web-search style query, in
-- the order they were stored (those a compaction summarized too), each with
-- a snippet around the match.
SELECT position, role, created_at,
       ts_headline('simple', left(message_text(content), 20000), websearch_to_tsquery('simple', @query::text), @headline_options::text)::text AS snippet
FROM messages
WHERE tenant_id = @tenant_id AND session_id = @session_id
  AND message_search(content) @@ websearch_to_tsquery('simple', @query::text)
ORDER BY position
LIMIT @max_rows;
