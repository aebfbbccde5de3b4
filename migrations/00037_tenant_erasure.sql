-- +goose Up

-- A tenant's erasure (mnemos tenant delete): every row of the tenant, table
-- by table, in batches, recorded and resumed as a session's or a scope's.
-- Its last step removes the tenant's row, and with it this record; the
-- audit log keeps what was done.
ALTER TABLE erasures DROP CONSTRAINT erasures_kind_check;
ALTER TABLE erasures ADD CONSTRAINT erasures_kind_check CHECK (kind IN ('session', 'scope', 'tenant'));

-- +goose Down
DELETE FROM erasures WHERE kind = 'tenant';
ALTER TABLE erasures DROP CONSTRAINT erasures_kind_check;
ALTER TABLE erasures ADD CONSTRAINT erasures_kind_check CHECK (kind IN ('session', 'scope'));
