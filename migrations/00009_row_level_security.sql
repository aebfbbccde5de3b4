-- +goose Up

-- Tenant isolation. Every table with a tenant_id column gets row-level
-- security, enabled and forced, and the policy tenant_isolation: a row is
-- visible and writable only by a transaction whose tenant, the
-- transaction-local setting mnemos.tenant_id (store.InTx sets it as its first
-- statement), is the row's tenant. A transaction that sets no tenant sees no
-- row and can write none.
--
-- Two roles take part. The owner is whoever runs the migrations: it owns
-- every table, function and policy. The services connect as mnemos_app (or
-- a login role that is a member of it), which owns nothing, so it can neither
-- alter nor drop a policy, and has no BYPASSRLS; `mnemos` refuses to serve
-- otherwise (store.CheckIsolation).
--
-- Work that spans tenants goes through the SECURITY DEFINER functions below,
-- each returning only what its caller needs. They run as the owner, so FORCE
-- would hide every row from them too: each table also has the policy
-- owner_without_tenant, which lets the owner see every row only while it
-- names no tenant (these functions, and migrations that change rows). While
-- a tenant is set, the owner is confined to that tenant like anyone else.

-- The services' role, without login: `mnemos migrate` gives it login (or
-- makes the role named in MNEMOS_DATABASE_URL a member of it). Roles belong
-- to the server, not the database, so it may exist already.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mnemos_app') THEN
        CREATE ROLE mnemos_app NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL; -- created by a migration of another database at the same moment
END
$$;
-- +goose StatementEnd

-- mnemos_enforce_tenant_isolation applies the isolation to every table of
-- the public schema: row-level security enabled and forced and both policies
-- on each table with a tenant_id column that lacks them, and the services'
-- privileges (SELECT, INSERT, UPDATE, DELETE; USAGE on sequences) on every
-- table but goose's. It is idempotent and returns how many tables it
-- changed. Every migration that adds a table calls it at its end:
--     SELECT mnemos_enforce_tenant_isolation();
-- +goose StatementBegin
CREATE FUNCTION mnemos_enforce_tenant_isolation() RETURNS integer
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
DECLARE
    t record;
    changed integer := 0;
BEGIN
    FOR t IN
        SELECT c.oid, c.relname, pg_get_userbyid(c.relowner) AS owner,
               c.relrowsecurity AS enabled, c.relforcerowsecurity AS forced,
               EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid AND p.polname = 'tenant_isolation') AS isolated,
               EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid AND p.polname = 'owner_without_tenant') AS owner_policy
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
          AND EXISTS (SELECT 1 FROM pg_attribute a
                      WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND a.attnum > 0 AND NOT a.attisdropped)
    LOOP
        IF t.enabled AND t.forced AND t.isolated AND t.owner_policy THEN
            CONTINUE;
        END IF;
        IF NOT t.isolated THEN
            EXECUTE format(
                'CREATE POLICY tenant_isolation ON %I '
                'USING (tenant_id = NULLIF(current_setting(''mnemos.tenant_id'', true), '''')) '
                'WITH CHECK (tenant_id = NULLIF(current_setting(''mnemos.tenant_id'', true), ''''))', t.relname);
        END IF;
        IF NOT t.owner_policy THEN
            EXECUTE format(
                'CREATE POLICY owner_without_tenant ON %I TO %I '
                'USING (NULLIF(current_setting(''mnemos.tenant_id'', true), '''') IS NULL) '
                'WITH CHECK (NULLIF(current_setting(''mnemos.tenant_id'', true), '''') IS NULL)', t.relname, t.owner);
        END IF;
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t.relname);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t.relname);
        changed := changed + 1;
    END LOOP;

    FOR t IN
        SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname <> 'goose_db_version'
    LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO mnemos_app', t.relname);
    END LOOP;
    GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO mnemos_app;
    RETURN changed;
END
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION mnemos_enforce_tenant_isolation() FROM PUBLIC;

-- Tables the migrating role creates later are usable by the services at
-- once; their isolation still needs mnemos_enforce_tenant_isolation().
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO mnemos_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE ON SEQUENCES TO mnemos_app;

-- Cross-tenant work, one narrow function each, run as the owner.

-- The tenant of an active API key: the key is verified before any tenant is known.
-- +goose StatementBegin
CREATE FUNCTION mnemos_api_key_tenant(key_hash bytea) RETURNS SETOF text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT k.tenant_id FROM api_keys k WHERE k.key_hash = $1 AND k.revoked_at IS NULL
$$;
-- +goose StatementEnd

-- The outbox relay publishes every tenant's events: it locks the oldest
-- rows for the caller's transaction, deletes those it published, and counts
-- what waits.
-- +goose StatementBegin
CREATE FUNCTION mnemos_outbox_claim(max_rows integer) RETURNS SETOF outbox
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT * FROM outbox ORDER BY id LIMIT max_rows FOR UPDATE SKIP LOCKED
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION mnemos_outbox_delete(ids bigint[]) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    DELETE FROM outbox WHERE id = ANY(ids)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION mnemos_outbox_pending() RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT count(*) FROM outbox
$$;
-- +goose StatementEnd

-- The accountant's gap sweep: sessions whose oldest waiting event arrived
-- before a cut-off, as tenant and session only; each is then handled in a
-- transaction of its tenant.
-- +goose StatementBegin
CREATE FUNCTION mnemos_stalled_sessions(before timestamptz, max_rows integer)
RETURNS TABLE (tenant_id text, session_id text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT t.tenant_id, t.session_id FROM turns t
    WHERE t.status = 'pending'
    GROUP BY t.tenant_id, t.session_id
    HAVING min(t.received_at) < before
    LIMIT max_rows
$$;
-- +goose StatementEnd

-- The session-memory sweep: sessions whose trailing notes run waits behind a
-- claim that ran out, as tenant and session only.
-- +goose StatementBegin
CREATE FUNCTION mnemos_stale_notes_claims(max_rows integer)
RETURNS TABLE (tenant_id text, session_id text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT n.tenant_id, n.session_id FROM session_notes n
    WHERE n.pending AND (n.update_lease_until IS NULL OR n.update_lease_until < now())
    ORDER BY n.update_lease_until NULLS FIRST
    LIMIT max_rows
$$;
-- +goose StatementEnd

-- Keys of one kind of run (pkg/singlerun) whose trailing run waits behind a
-- lease that was released or ran out, as tenant and key only.
-- +goose StatementBegin
CREATE FUNCTION mnemos_stale_runs(run_kind text, max_rows integer)
RETURNS TABLE (tenant_id text, key text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT r.tenant_id, r.key FROM run_leases r
    WHERE r.kind = run_kind AND r.pending AND (r.lease_until IS NULL OR r.lease_until < now())
    ORDER BY r.lease_until NULLS FIRST
    LIMIT max_rows
$$;
-- +goose StatementEnd

-- Sessions per threshold state over every tenant, for the sessions gauge:
-- counts only, no tenant.
-- +goose StatementBegin
CREATE FUNCTION mnemos_sessions_by_state()
RETURNS TABLE (state text, sessions bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT s.state, count(*)::bigint FROM sessions s GROUP BY s.state
$$;
-- +goose StatementEnd

REVOKE EXECUTE ON FUNCTION mnemos_api_key_tenant(bytea), mnemos_outbox_claim(integer), mnemos_outbox_delete(bigint[]),
    mnemos_outbox_pending(), mnemos_stalled_sessions(timestamptz, integer), mnemos_stale_notes_claims(integer), mnemos_stale_runs(text, integer), mnemos_sessions_by_state(),
    mnemos_dream_candidates(text, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mnemos_api_key_tenant(bytea), mnemos_outbox_claim(integer), mnemos_outbox_delete(bigint[]),
    mnemos_outbox_pending(), mnemos_stalled_sessions(timestamptz, integer), mnemos_stale_notes_claims(integer), mnemos_stale_runs(text, integer), mnemos_sessions_by_state(),
    mnemos_dream_candidates(text, text, integer) TO mnemos_app;
GRANT USAGE ON SCHEMA public TO mnemos_app;

SELECT mnemos_enforce_tenant_isolation();

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN
        SELECT DISTINCT c.relname FROM pg_policy p
        JOIN pg_class c ON c.oid = p.polrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND p.polname IN ('tenant_isolation', 'owner_without_tenant')
    LOOP
        EXECUTE format('DROP POLICY IF EXISTS tenant_isolation ON %I', t.relname);
        EXECUTE format('DROP POLICY IF EXISTS owner_without_tenant ON %I', t.relname);
        EXECUTE format('ALTER TABLE %I NO FORCE ROW LEVEL SECURITY', t.relname);
        EXECUTE format('ALTER TABLE %I DISABLE ROW LEVEL SECURITY', t.relname);
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP FUNCTION mnemos_sessions_by_state();
DROP FUNCTION mnemos_stale_runs(text, integer);
DROP FUNCTION mnemos_stale_notes_claims(integer);
DROP FUNCTION mnemos_stalled_sessions(timestamptz, integer);
DROP FUNCTION mnemos_outbox_pending();
DROP FUNCTION mnemos_outbox_delete(bigint[]);
DROP FUNCTION mnemos_outbox_claim(integer);
DROP FUNCTION mnemos_api_key_tenant(bytea);
DROP FUNCTION mnemos_enforce_tenant_isolation();
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE USAGE ON SEQUENCES FROM mnemos_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE SELECT, INSERT, UPDATE, DELETE ON TABLES FROM mnemos_app;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM mnemos_app;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM mnemos_app;
REVOKE USAGE ON SCHEMA public FROM mnemos_app;
-- The role stays: other databases on the server may use it.
