-- +goose Up

-- A tenant's upstream for the Messages API proxy: the Anthropic-compatible
-- base URL its requests go to and the key Mnemos calls it with. The key is
-- a secret Mnemos holds for the tenant: no API returns it and nothing logs
-- it. A tenant without a row uses the process's upstream
-- (MNEMOS_UPSTREAM_ANTHROPIC_URL).
CREATE TABLE tenant_upstreams (
    tenant_id  text        PRIMARY KEY REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    url        text        NOT NULL,
    api_key    text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

SELECT mnemos_enforce_tenant_isolation();

-- +goose Down
DROP TABLE tenant_upstreams;
