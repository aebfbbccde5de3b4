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

-- name: TenantUpstreamGet :one
SELECT url, api_key FROM tenant_upstreams WHERE tenant_id = @tenant_id AND provider = @provider;

-- name: TenantUpstreamSet :exec
INSERT INTO tenant_upstreams (tenant_id, provider, url, api_key) VALUES (@tenant_id, @provider, @url, @api_key)
ON CONFLICT (tenant_id, provider) DO UPDATE SET url = excluded.url, api_key = excluded.api_key, updated_at = now();

-- name: TenantUpstreamDelete :execrows
DELETE FROM tenant_upstreams WHERE tenant_id = @tenant_id AND provider = @provider;
