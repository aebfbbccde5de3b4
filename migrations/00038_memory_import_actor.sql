-- +goose Up

-- An import of a scope's archive (POST /v1/scopes/{scope}/import, mnemos
-- import) writes its revisions as the actor 'import'.
ALTER TABLE memory_revisions DROP CONSTRAINT memory_revisions_actor_check;
ALTER TABLE memory_revisions ADD CONSTRAINT memory_revisions_actor_check
    CHECK (actor IN ('agent', 'extractor', 'dreamer', 'api', 'import'));

-- +goose Down

DELETE FROM memory_revisions WHERE actor = 'import';
ALTER TABLE memory_revisions DROP CONSTRAINT memory_revisions_actor_check;
ALTER TABLE memory_revisions ADD CONSTRAINT memory_revisions_actor_check
    CHECK (actor IN ('agent', 'extractor', 'dreamer', 'api'));
