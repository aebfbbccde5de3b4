-- +goose Up
-- Texts pinned to a session (PUT /v1/sessions/{id}/pins): carried verbatim
-- after every compaction, outside the summary, after the tenant's own
-- (compaction.pinned).
ALTER TABLE sessions ADD COLUMN pins text[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE sessions DROP COLUMN pins;
