-- +goose Up

-- A tenant may hold one upstream per provider: an Anthropic-compatible one
-- for the Messages API proxy and an OpenAI-compatible one for the OpenAI
-- routes. The rows stored before this were all Anthropic's. A tenant
-- without a row for a provider uses the process's upstream for it
-- (MNEMOS_UPSTREAM_ANTHROPIC_URL, MNEMOS_UPSTREAM_OPENAI_URL).
ALTER TABLE tenant_upstreams
    ADD COLUMN provider text NOT NULL DEFAULT 'anthropic'
        CONSTRAINT tenant_upstreams_provider_check CHECK (provider IN ('anthropic', 'openai'));
ALTER TABLE tenant_upstreams ALTER COLUMN provider DROP DEFAULT;
ALTER TABLE tenant_upstreams DROP CONSTRAINT tenant_upstreams_pkey;
ALTER TABLE tenant_upstreams ADD PRIMARY KEY (tenant_id, provider);

-- +goose Down
DELETE FROM tenant_upstreams WHERE provider <> 'anthropic';
ALTER TABLE tenant_upstreams DROP CONSTRAINT tenant_upstreams_pkey;
ALTER TABLE tenant_upstreams ADD PRIMARY KEY (tenant_id);
ALTER TABLE tenant_upstreams DROP COLUMN provider;
