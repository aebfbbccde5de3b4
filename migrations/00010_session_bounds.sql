-- +goose Up

-- What a session gave up: the seqs the accountant stopped waiting for after
-- the gap timeout, in total and the last range (from, to; 0, 0 before the
-- first), so a session that moved past a gap says so in the API.
ALTER TABLE sessions
    ADD COLUMN skipped_seqs bigint NOT NULL DEFAULT 0,
    ADD COLUMN last_skipped_from bigint NOT NULL DEFAULT 0,
    ADD COLUMN last_skipped_to bigint NOT NULL DEFAULT 0;

-- mnemos_lock_session creates a session when new and returns its row locked
-- until the transaction ends, like the upsert it wraps, but waits at most
-- wait_ms for a lock another transaction holds: past that it fails with
-- lock_not_available (55P03), and the caller tries again later instead of
-- holding a connection in the lock's queue. The wait is the function's own:
-- its SET clause restores the caller's lock_timeout when it returns, so the
-- rest of the transaction waits as usual. It runs as the caller, under the
-- caller's tenant.
-- +goose StatementBegin
CREATE FUNCTION mnemos_lock_session(tenant text, session text, agent text, wait_ms integer) RETURNS SETOF sessions
LANGUAGE plpgsql VOLATILE SET lock_timeout = 0 SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM set_config('lock_timeout', wait_ms::text, true);
    RETURN QUERY
        INSERT INTO sessions AS s (tenant_id, session_id, agent_id) VALUES (tenant, session, agent)
        ON CONFLICT (tenant_id, session_id) DO UPDATE SET updated_at = s.updated_at
        RETURNING s.*;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION mnemos_lock_session(text, text, text, integer);
ALTER TABLE sessions
    DROP COLUMN skipped_seqs,
    DROP COLUMN last_skipped_from,
    DROP COLUMN last_skipped_to;
