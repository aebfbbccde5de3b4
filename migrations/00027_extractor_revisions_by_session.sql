-- +goose Up

-- What the extractor created from a session's turns, found by the session:
-- a run made again for a turn announces what an earlier run for it wrote
-- and was cut short before announcing (ExtractorCreatedFor). Without it
-- every run would read all of its scope's revisions.
CREATE INDEX memory_revisions_extractor_created ON memory_revisions (tenant_id, session_id)
    WHERE actor = 'extractor' AND op = 'created';

-- +goose Down
DROP INDEX memory_revisions_extractor_created;
