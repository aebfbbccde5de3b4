-- name: OutboxInsert :exec
INSERT INTO outbox (tenant_id, subject, msg_id, payload, headers)
VALUES (@tenant_id, @subject, @msg_id, @payload, @headers);

-- name: OutboxNotify :exec
SELECT pg_notify('mnemos_outbox', '');

-- name: OutboxClaim :many
-- Locks the oldest unpublished rows; concurrent relays skip each other's rows.
SELECT * FROM outbox ORDER BY id LIMIT @max_rows FOR UPDATE SKIP LOCKED;

-- name: OutboxDelete :exec
DELETE FROM outbox WHERE id = ANY(@ids::bigint[]);

-- name: OutboxPending :one
SELECT count(*) FROM outbox;
