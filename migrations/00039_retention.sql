-- +goose Up

-- Retention (pkg/retain): each tenant's rules (tenants.settings ->
-- 'retention') remove what is older than they allow, in batches. The
-- indexes below let a sweep that finds nothing due read only the rows near
-- its cutoff. Sessions get none: their updated_at changes with every turn,
-- and an index on it would cost every turn its HOT update; the sweep reads
-- sessions_created instead (a session idle since the cutoff was created
-- before it).
CREATE INDEX tool_results_created ON tool_results (tenant_id, created_at);
CREATE INDEX memory_revisions_created ON memory_revisions (tenant_id, created_at);
-- Whether an id missing from tool_results was offloaded once (and has
-- expired since) or never existed: GET /v1/tool-results/{id} tells them apart.
CREATE INDEX content_replacements_tool_result ON content_replacements (tenant_id, tool_result_id)
    WHERE tool_result_id IS NOT NULL;

-- The sweep's read across tenants: those whose settings name a retention
-- section, which the sweep then reads as effective settings (tenantcfg).
-- +goose StatementBegin
CREATE FUNCTION mnemos_retention_tenants()
RETURNS TABLE (tenant_id text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT t.tenant_id FROM tenants t WHERE t.settings ? 'retention' ORDER BY t.tenant_id
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION mnemos_retention_tenants() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mnemos_retention_tenants() TO mnemos_app;

-- +goose Down
DROP FUNCTION mnemos_retention_tenants();
DROP INDEX content_replacements_tool_result;
DROP INDEX memory_revisions_created;
DROP INDEX tool_results_created;
