-- +goose Up

-- The operator API (/admin/v1 on the admin listener) and the tenants it
-- manages.

-- Operator keys act on every tenant, so they are kept apart from tenants'
-- API keys: a table of their own, with no tenant_id and so no row-level
-- security, read and written by the services' role. As with API keys,
-- Postgres holds a key's SHA-256 only, with its id and a visible prefix.
CREATE TABLE operator_keys (
    id           text        PRIMARY KEY,
    name         text        NOT NULL,
    prefix       text        NOT NULL,
    hash         bytea       NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);

-- A suspended tenant keeps its keys and data; its keys are refused.
ALTER TABLE tenants ADD COLUMN suspended_at timestamptz;

-- The gateway's key check answers whether the key's tenant is suspended,
-- so a suspended tenant's key is told so (403) rather than unknown (401).
DROP FUNCTION mnemos_api_key(bytea);
-- +goose StatementBegin
CREATE FUNCTION mnemos_api_key(key_hash bytea)
RETURNS TABLE (tenant_id text, key_id text, scopes text[], expires_at timestamptz, suspended boolean)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT k.tenant_id, k.key_id, k.scopes, k.expires_at, t.suspended_at IS NOT NULL
    FROM api_keys k JOIN tenants t ON t.tenant_id = k.tenant_id
    WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION mnemos_api_key(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mnemos_api_key(bytea) TO mnemos_app;

-- A tenant suspended or resumed announces each of its keys on the channel
-- mnemos_api_keys, as a key revoked does: every gateway process forgets
-- what it knew of them and checks them again.
-- +goose StatementBegin
CREATE FUNCTION mnemos_tenant_suspension_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM pg_notify('mnemos_api_keys', encode(k.key_hash, 'hex'))
    FROM api_keys k WHERE k.tenant_id = NEW.tenant_id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION mnemos_tenant_suspension_changed() FROM PUBLIC;
CREATE TRIGGER tenants_suspension_changed AFTER UPDATE OF suspended_at ON tenants
    FOR EACH ROW WHEN (OLD.suspended_at IS DISTINCT FROM NEW.suspended_at)
    EXECUTE FUNCTION mnemos_tenant_suspension_changed();

-- The operator's reads across tenants: the tenants, and the audit log of
-- them all. Each tenant's own rows are read in its transactions.
-- +goose StatementBegin
CREATE FUNCTION mnemos_tenants()
RETURNS TABLE (tenant_id text, name text, created_at timestamptz, suspended_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT t.tenant_id, t.name, t.created_at, t.suspended_at FROM tenants t ORDER BY t.tenant_id
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION mnemos_audit_log(before bigint, max_rows integer)
RETURNS SETOF audit_log
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT * FROM audit_log a WHERE a.id < before ORDER BY a.id DESC LIMIT max_rows
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION mnemos_tenants(), mnemos_audit_log(bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mnemos_tenants(), mnemos_audit_log(bigint, integer) TO mnemos_app;

SELECT mnemos_enforce_tenant_isolation();

-- +goose Down
DROP FUNCTION mnemos_audit_log(bigint, integer);
DROP FUNCTION mnemos_tenants();
DROP TRIGGER tenants_suspension_changed ON tenants;
DROP FUNCTION mnemos_tenant_suspension_changed();
DROP FUNCTION mnemos_api_key(bytea);
-- +goose StatementBegin
CREATE FUNCTION mnemos_api_key(key_hash bytea)
RETURNS TABLE (tenant_id text, key_id text, scopes text[], expires_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT k.tenant_id, k.key_id, k.scopes, k.expires_at FROM api_keys k
    WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION mnemos_api_key(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mnemos_api_key(bytea) TO mnemos_app;
ALTER TABLE tenants DROP COLUMN suspended_at;
DROP TABLE operator_keys;
