-- +goose Up

-- GET /v1/sessions pages through a tenant's sessions newest first, by
-- (created_at, session_id): a key no update changes, so a page boundary
-- stays where it was while sessions are written and created.
CREATE INDEX sessions_created ON sessions (tenant_id, created_at, session_id);

-- +goose Down
DROP INDEX sessions_created;
