-- name: OutboxInsert :exec
INSERT INTO outbox (tenant_id, subject, msg_id, payload, headers)
VALUES (@tenant_id, @subject, @msg_id, @payload, @headers);

-- name: OutboxInsertMany :exec
-- OutboxInsert for many rows in one statement (a batch of turns): the
-- arrays are parallel, read side by side, and the rows take their ids in
-- the arrays' order.
INSERT INTO outbox (tenant_id, subject, msg_id, payload, headers)
SELECT @tenant_id::text, u.subject, u.msg_id, u.payload, u.headers::jsonb
FROM ROWS FROM (unnest(@subjects::text[]), unnest(@msg_ids::text[]), unnest(@payloads::bytea[]), unnest(@headers::text[]))
    WITH ORDINALITY AS u(subject, msg_id, payload, headers, i)
ORDER BY u.i;

-- name: OutboxNotify :exec
-- The payload names the store that sends it, whose own LISTEN passes over it.
SELECT pg_notify('mnemos_outbox', @sender::text);

-- name: OutboxClaim :many
-- Locks the oldest unpublished rows of every tenant; concurrent relays skip
-- each other's rows. Across tenants: through the owner's function.
SELECT * FROM mnemos_outbox_claim(@max_rows::integer);

-- name: OutboxDelete :exec
SELECT mnemos_outbox_delete(@ids::bigint[]);

-- name: OutboxPending :one
SELECT mnemos_outbox_pending()::bigint AS pending;
