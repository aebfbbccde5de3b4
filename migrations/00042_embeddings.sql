-- +goose Up

-- Vectors of messages and memories, for the vector half of search
-- (docs/memory.md, "Embeddings"). The embedder target writes them when a
-- deployment configures an embeddings endpoint; without one both tables
-- stay empty. A vector is its float32 elements, little-endian, 4 bytes
-- each (pkg/embed.Encode), of unit length, so a cosine is a dot product.
-- Postgres here has no vector type: search reads a scope's vectors and
-- scores them in Go.

-- One row per message the embedder has read, keyed as the message is in
-- the order of its session. vector is NULL for a message without text to
-- embed (only tool calls, tool results or thinking): the row still marks
-- it read, so the embedder resumes after the highest position it wrote.
-- Erasing a message erases its vector (the foreign key cascades).
CREATE TABLE message_vectors (
    tenant_id  text        NOT NULL,
    session_id text        NOT NULL,
    position   bigint      NOT NULL,
    model      text        NOT NULL,
    vector     bytea,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id, position),
    FOREIGN KEY (tenant_id, session_id, position) REFERENCES messages (tenant_id, session_id, position) ON DELETE CASCADE
);

-- One row per memory: the vector of its name, description and body at
-- revision. A memory changed since is embedded again.
CREATE TABLE memory_vectors (
    tenant_id  text        NOT NULL,
    scope      text        NOT NULL,
    name       text        NOT NULL,
    revision   bigint      NOT NULL,
    model      text        NOT NULL,
    vector     bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, scope, name),
    FOREIGN KEY (tenant_id, scope, name) REFERENCES memories ON DELETE CASCADE
);

-- Floats barely compress: vectors are stored uncompressed, so a search
-- that reads a scope's vectors spends nothing decompressing them.
ALTER TABLE message_vectors ALTER COLUMN vector SET STORAGE EXTERNAL;
ALTER TABLE memory_vectors ALTER COLUMN vector SET STORAGE EXTERNAL;

SELECT mnemos_enforce_tenant_isolation();

-- +goose Down
DROP TABLE memory_vectors;
DROP TABLE message_vectors;
