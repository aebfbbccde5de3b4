-- name: TenantUpsert :exec
INSERT INTO tenants (tenant_id, name) VALUES (@tenant_id, @name)
ON CONFLICT (tenant_id) DO NOTHING;

-- name: TenantGet :one
SELECT * FROM tenants WHERE tenant_id = @tenant_id;

-- name: APIKeyInsert :exec
INSERT INTO api_keys (key_hash, tenant_id, name) VALUES (@key_hash, @tenant_id, @name)
ON CONFLICT (key_hash) DO NOTHING;

-- name: APIKeyTenant :one
-- The tenant of an active key, before any tenant is known: through the
-- owner's function.
SELECT tenant_id::text FROM mnemos_api_key_tenant(@key_hash::bytea) AS tenant_id;

-- name: TenantSetSettings :execrows
UPDATE tenants SET settings = @settings WHERE tenant_id = @tenant_id;
