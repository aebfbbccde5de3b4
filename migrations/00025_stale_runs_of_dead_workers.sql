-- +goose Up

-- A run whose lease ran out was cut short: its worker died or stalled
-- while it ran, since a live worker renews the lease and a finished run
-- lets it go. Its work may be unfinished even with no request pending: a
-- sweep's run, or a trailing run, stands for requests whose messages were
-- acknowledged long ago, and nothing delivers them again. The sweep now
-- takes such a key too, pending or not (work is idempotent: a run with
-- nothing owed does nothing).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION mnemos_stale_runs(run_kind text, max_rows integer)
RETURNS TABLE (tenant_id text, key text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT r.tenant_id, r.key FROM run_leases r
    WHERE r.kind = run_kind AND (r.lease_until < now() OR (r.pending AND r.lease_until IS NULL))
    ORDER BY r.lease_until NULLS FIRST
    LIMIT max_rows
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION mnemos_stale_runs(run_kind text, max_rows integer)
RETURNS TABLE (tenant_id text, key text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT r.tenant_id, r.key FROM run_leases r
    WHERE r.kind = run_kind AND r.pending AND (r.lease_until IS NULL OR r.lease_until < now())
    ORDER BY r.lease_until NULLS FIRST
    LIMIT max_rows
$$;
-- +goose StatementEnd
