-- +goose Up
-- What a completed compaction kept of what must survive the messages it
-- replaced (pkg/retention): the mean share found over the categories that
-- had anything to keep, and each category's {"found", "total"}. NULL for a
-- compaction that did not complete, or completed before this column.
ALTER TABLE compactions
    ADD COLUMN retention        double precision CHECK (retention BETWEEN 0 AND 1),
    ADD COLUMN retention_detail jsonb;

-- +goose Down
ALTER TABLE compactions DROP COLUMN retention, DROP COLUMN retention_detail;
