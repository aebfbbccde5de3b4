-- name: TenantUpsert :exec
INSERT INTO tenants (tenant_id, name) VALUES (@tenant_id, @name)
ON CONFLICT (tenant_id) DO NOTHING;

-- name: TenantGet :one
SELECT * FROM tenants WHERE tenant_id = @tenant_id;

-- name: APIKeyInsert :exec
INSERT INTO api_keys (key_hash, tenant_id, name) VALUES (@key_hash, @tenant_id, @name)
ON CONFLICT (key_hash) DO NOTHING;

-- name: APIKeyTenant :one
SELECT tenant_id FROM api_keys WHERE key_hash = @key_hash AND revoked_at IS NULL;

-- name: TenantSetSettings :execrows
UPDATE tenants SET settings = @settings WHERE tenant_id = @tenant_id;
