-- +goose Up

-- Sizing a context before rendering it (the gateway's admission) summed
-- every message from the session's kept point on: for a session of tens of
-- thousands of messages a scan that held a Postgres core on every context
-- request. Each message now carries the running total of the session's
-- message sizes through it, and the session the total of all of them, so a
-- context's size is the difference of two rows found by index. A message's
-- size is the larger of its content's length and four bytes per estimated
-- token (store.MessageSize).
ALTER TABLE messages ADD COLUMN bytes_through bigint NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN message_bytes bigint NOT NULL DEFAULT 0;

UPDATE messages m SET bytes_through = t.total
FROM (
    SELECT tenant_id, session_id, position,
           sum(greatest(octet_length(content::text)::bigint, 4 * estimate_tokens))
               OVER (PARTITION BY tenant_id, session_id ORDER BY position) AS total
    FROM messages
) t
WHERE m.tenant_id = t.tenant_id AND m.session_id = t.session_id AND m.position = t.position;

UPDATE sessions s SET message_bytes = t.total
FROM (
    SELECT tenant_id, session_id, max(bytes_through) AS total
    FROM messages GROUP BY tenant_id, session_id
) t
WHERE s.tenant_id = t.tenant_id AND s.session_id = t.session_id;

ALTER TABLE messages ALTER COLUMN bytes_through DROP DEFAULT;

-- +goose Down
ALTER TABLE sessions DROP COLUMN message_bytes;
ALTER TABLE messages DROP COLUMN bytes_through;
