-- +goose Up

-- A version of each session's message vectors, for the search's cache of
-- them (pkg/search, docs/memory.md "Search with embeddings"): a process
-- keeps a session's vectors with the version it read them at, and reads
-- them again only when the version moved. Every statement that writes,
-- replaces or deletes vectors of a session moves its version, by the
-- triggers below, in the statement's own transaction.
CREATE TABLE message_vector_versions (
    tenant_id  text   NOT NULL,
    session_id text   NOT NULL,
    version    bigint NOT NULL DEFAULT 1,
    PRIMARY KEY (tenant_id, session_id),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions ON DELETE CASCADE
);

-- Written or replaced (the embedder's upsert fires both): the version is
-- made or moved.
-- +goose StatementBegin
CREATE FUNCTION message_vector_versions_bump() RETURNS trigger
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
BEGIN
    INSERT INTO message_vector_versions AS v (tenant_id, session_id)
    SELECT DISTINCT tenant_id, session_id FROM changed_vectors
    ON CONFLICT (tenant_id, session_id) DO UPDATE SET version = v.version + 1;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- Deleted (a message erased or rewound, its session erased): the version
-- moves where it still exists. An erased session's row goes with it, and
-- inserting one here would refer to the session being deleted.
-- +goose StatementBegin
CREATE FUNCTION message_vector_versions_deleted() RETURNS trigger
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
BEGIN
    UPDATE message_vector_versions v SET version = v.version + 1
    FROM (SELECT DISTINCT tenant_id, session_id FROM changed_vectors) d
    WHERE v.tenant_id = d.tenant_id AND v.session_id = d.session_id;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER message_vector_versions_insert AFTER INSERT ON message_vectors
    REFERENCING NEW TABLE AS changed_vectors FOR EACH STATEMENT EXECUTE FUNCTION message_vector_versions_bump();
CREATE TRIGGER message_vector_versions_update AFTER UPDATE ON message_vectors
    REFERENCING NEW TABLE AS changed_vectors FOR EACH STATEMENT EXECUTE FUNCTION message_vector_versions_bump();
CREATE TRIGGER message_vector_versions_delete AFTER DELETE ON message_vectors
    REFERENCING OLD TABLE AS changed_vectors FOR EACH STATEMENT EXECUTE FUNCTION message_vector_versions_deleted();

-- What is stored already: the migration runs as the owner, no tenant set.
INSERT INTO message_vector_versions (tenant_id, session_id)
SELECT DISTINCT tenant_id, session_id FROM message_vectors;

SELECT mnemos_enforce_tenant_isolation();

-- +goose Down
DROP TRIGGER message_vector_versions_delete ON message_vectors;
DROP TRIGGER message_vector_versions_update ON message_vectors;
DROP TRIGGER message_vector_versions_insert ON message_vectors;
DROP FUNCTION message_vector_versions_deleted();
DROP FUNCTION message_vector_versions_bump();
DROP TABLE message_vector_versions;
