-- +goose Up

-- An erasure of a tenant's session or memory scope (DELETE /v1/sessions/{id},
-- DELETE /v1/scopes/{scope}). The row is written first, in a transaction
-- of its own, so an erasure a crash cut short is found and finished: the
-- request itself works it through, and the gateway's sweep
-- (mnemos_unfinished_erasures) takes over the ones whose worker stopped.
-- The rows go in batches, each its own short transaction, which adds the
-- rows it removed to deleted ({"messages": 1200, ...}). sessions holds the
-- Mnemos sessions a session's erasure covers: the session and the threads
-- the proxy kept under it, remembered here because the rows that tie a
-- thread to its session are erased too. One unfinished erasure per target.
CREATE TABLE erasures (
    id           bigserial   PRIMARY KEY,
    tenant_id    text        NOT NULL REFERENCES tenants ON DELETE CASCADE,
    kind         text        NOT NULL CHECK (kind IN ('session', 'scope')),
    target       text        NOT NULL,
    actor        text        NOT NULL,
    sessions     text[]      NOT NULL DEFAULT '{}',
    deleted      jsonb       NOT NULL DEFAULT '{}',
    requested_at timestamptz NOT NULL DEFAULT now(),
    -- When a worker last took the erasure up: the sweep leaves alone the
    -- ones taken up within its lease.
    worked_at    timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz
);
CREATE UNIQUE INDEX erasures_unfinished ON erasures (tenant_id, kind, target) WHERE finished_at IS NULL;
CREATE INDEX erasures_by_target ON erasures (tenant_id, kind, target, requested_at DESC);

-- The sweep's read across tenants: unfinished erasures nobody took up
-- since before, oldest first, as ids with their tenants.
-- +goose StatementBegin
CREATE FUNCTION mnemos_unfinished_erasures(before timestamptz, max_rows integer)
RETURNS TABLE (tenant_id text, id bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT e.tenant_id, e.id FROM erasures e
    WHERE e.finished_at IS NULL AND e.worked_at < before
    ORDER BY e.worked_at
    LIMIT max_rows
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION mnemos_unfinished_erasures(timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mnemos_unfinished_erasures(timestamptz, integer) TO mnemos_app;

SELECT mnemos_enforce_tenant_isolation();

-- +goose Down
DROP FUNCTION mnemos_unfinished_erasures(timestamptz, integer);
DROP TABLE erasures;
