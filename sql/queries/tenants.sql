-- name: TenantUpsert :exec
INSERT INTO tenants (tenant_id, name) VALUES (@tenant_id, @name)
ON CONFLICT (tenant_id) DO NOTHING;

-- name: TenantGet :one
SELECT * FROM tenants WHERE tenant_id = @tenant_id;

-- name: APIKeyInsert :one
INSERT INTO api_keys (key_hash, tenant_id, name, key_id, prefix, scopes, expires_at)
VALUES (@key_hash, @tenant_id, @name, @key_id, @prefix, @scopes::text[], sqlc.narg(expires_at))
ON CONFLICT (key_hash) DO NOTHING
RETURNING *;

-- name: APIKeyLookup :one
-- An active key, before any tenant is known: through the owner's
-- function.
SELECT k.tenant_id::text AS tenant_id, k.key_id::text AS key_id, k.scopes::text[] AS scopes, k.expires_at::timestamptz AS expires_at,
       k.suspended::boolean AS suspended
FROM mnemos_api_key(@key_hash::bytea) AS k (tenant_id, key_id, scopes, expires_at, suspended);

-- name: APIKeyList :many
SELECT * FROM api_keys WHERE tenant_id = @tenant_id ORDER BY created_at, key_id;

-- name: APIKeyGet :one
SELECT * FROM api_keys WHERE tenant_id = @tenant_id AND key_id = @key_id;

-- name: APIKeyRevoke :one
UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
WHERE tenant_id = @tenant_id AND key_id = @key_id
RETURNING *;

-- name: APIKeyExpireBy :one
-- The key expires at @expires_at, or sooner if it was to already.
UPDATE api_keys SET expires_at = least(coalesce(expires_at, @expires_at), @expires_at)
WHERE tenant_id = @tenant_id AND key_id = @key_id
RETURNING *;

-- name: APIKeyTouch :exec
-- At most one write a minute for a key in use.
UPDATE api_keys SET last_used_at = now()
WHERE tenant_id = @tenant_id AND key_id = @key_id
  AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute');

-- name: AuditInsert :exec
INSERT INTO audit_log (tenant_id, actor, action, target, detail) VALUES (@tenant_id, @actor, @action, @target, @detail);

-- name: AuditList :many
SELECT * FROM audit_log WHERE tenant_id = @tenant_id AND id < @before ORDER BY id DESC LIMIT @max_rows;

-- name: TenantSetSettings :execrows
UPDATE tenants SET settings = @settings WHERE tenant_id = @tenant_id;

-- name: TenantUpstreamGet :one
SELECT url, api_key FROM tenant_upstreams WHERE tenant_id = @tenant_id AND provider = @provider;

-- name: TenantUpstreamSet :exec
INSERT INTO tenant_upstreams (tenant_id, provider, url, api_key) VALUES (@tenant_id, @provider, @url, @api_key)
ON CONFLICT (tenant_id, provider) DO UPDATE SET url = excluded.url, api_key = excluded.api_key, updated_at = now();

-- name: TenantUpstreamDelete :execrows
DELETE FROM tenant_upstreams WHERE tenant_id = @tenant_id AND provider = @provider;

-- name: TenantInsert :execrows
INSERT INTO tenants (tenant_id, name) VALUES (@tenant_id, @name)
ON CONFLICT (tenant_id) DO NOTHING;

-- name: TenantList :many
-- Every tenant, across tenants: through the owner's function.
SELECT t.tenant_id::text AS tenant_id, t.name::text AS name, t.created_at::timestamptz AS created_at, t.suspended_at::timestamptz AS suspended_at
FROM mnemos_tenants() AS t (tenant_id, name, created_at, suspended_at);

-- name: TenantSetSuspended :one
-- Suspends the tenant (@suspend) as of now, or resumes it; suspending a
-- suspended tenant keeps its time.
UPDATE tenants SET suspended_at = CASE WHEN @suspend::boolean THEN coalesce(suspended_at, now()) END
WHERE tenant_id = @tenant_id
RETURNING *;

-- name: AuditListAll :many
-- Every tenant's audit records: through the owner's function.
SELECT * FROM mnemos_audit_log(@before::bigint, @max_rows::integer);

-- name: OperatorKeyInsert :one
INSERT INTO operator_keys (id, name, prefix, hash) VALUES (@id, @name, @prefix, @hash)
RETURNING *;

-- name: OperatorKeyList :many
SELECT * FROM operator_keys ORDER BY created_at, id;

-- name: OperatorKeyLookup :one
-- An active operator key by its hash.
SELECT * FROM operator_keys WHERE hash = @hash AND revoked_at IS NULL;

-- name: OperatorKeyRevoke :one
UPDATE operator_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = @id
RETURNING *;

-- name: OperatorKeyTouch :exec
-- At most one write a minute for a key in use.
UPDATE operator_keys SET last_used_at = now()
WHERE id = @id AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute');
