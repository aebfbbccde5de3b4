-- +goose Up

-- The sessions gauge counts every session by state once a period
-- (mnemos_sessions_by_state). Under row-level security its policies need
-- each row's tenant, so without this index the count read the whole
-- table, row by row; with it, the count reads this index alone wherever
-- the table's pages are all visible (vacuumed). A session's state and
-- tenant seldom change, so its updates stay HOT.
CREATE INDEX sessions_state_tenant ON sessions (state, tenant_id);

-- +goose Down
DROP INDEX sessions_state_tenant;
