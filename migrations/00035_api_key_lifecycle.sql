-- +goose Up

-- API keys get a life an operator can manage: an id to name them by, a
-- visible prefix (the secret's first characters, "mnm_" then eight more),
-- scopes, an optional expiry and the last time one was used. Keys stored
-- before this are named by their hash and keep every scope they had in
-- effect: all of them.
ALTER TABLE api_keys
    ADD COLUMN key_id       text,
    ADD COLUMN prefix       text        NOT NULL DEFAULT '',
    ADD COLUMN scopes       text[]      NOT NULL DEFAULT ARRAY['ingest', 'proxy', 'read', 'memory:write', 'admin'],
    ADD COLUMN expires_at   timestamptz,
    ADD COLUMN last_used_at timestamptz;
UPDATE api_keys SET key_id = 'key_' || substr(encode(key_hash, 'hex'), 1, 16);
ALTER TABLE api_keys ALTER COLUMN key_id SET NOT NULL;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_key_id_key UNIQUE (key_id);
ALTER TABLE api_keys ALTER COLUMN scopes DROP DEFAULT;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_scopes_check
    CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['ingest', 'proxy', 'read', 'memory:write', 'admin']);

-- The gateway's key check: the tenant, id, scopes and expiry of one active
-- key (neither revoked nor expired).
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
DROP FUNCTION mnemos_api_key_tenant(bytea);

-- Every gateway process keeps the keys it verified for a while: a key
-- revoked, expired sooner, rescoped or deleted is announced on the channel
-- mnemos_api_keys (the hex of its hash), and each process forgets it.
-- +goose StatementBegin
CREATE FUNCTION mnemos_api_key_changed() RETURNS trigger
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM pg_notify('mnemos_api_keys', encode(OLD.key_hash, 'hex'));
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER api_keys_changed AFTER UPDATE OF revoked_at, expires_at, scopes OR DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION mnemos_api_key_changed();

-- What was done to a tenant's keys and data, by whom: a record holds no
-- content of what it names, and has no foreign key, so that it outlives
-- what it records.
CREATE TABLE audit_log (
    id        bigserial   PRIMARY KEY,
    tenant_id text        NOT NULL,
    at        timestamptz NOT NULL DEFAULT now(),
    actor     text        NOT NULL,
    action    text        NOT NULL,
    target    text        NOT NULL DEFAULT '',
    detail    jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_tenant_at ON audit_log (tenant_id, at);

SELECT mnemos_enforce_tenant_isolation();

-- +goose Down
DROP TABLE audit_log;
DROP TRIGGER api_keys_changed ON api_keys;
DROP FUNCTION mnemos_api_key_changed();
-- +goose StatementBegin
CREATE FUNCTION mnemos_api_key_tenant(key_hash bytea) RETURNS SETOF text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT k.tenant_id FROM api_keys k WHERE k.key_hash = $1 AND k.revoked_at IS NULL
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION mnemos_api_key_tenant(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mnemos_api_key_tenant(bytea) TO mnemos_app;
DROP FUNCTION mnemos_api_key(bytea);
ALTER TABLE api_keys DROP CONSTRAINT api_keys_scopes_check;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_key_id_key;
ALTER TABLE api_keys DROP COLUMN key_id, DROP COLUMN prefix, DROP COLUMN scopes, DROP COLUMN expires_at, DROP COLUMN last_used_at;
