-- +goose Up

-- The columns that hold whole requests, messages and tool output are
-- compressed with lz4 instead of Postgres's default pglz when the server
-- has it (built --with-lz4, as the Debian, RHEL and official container
-- builds are). A Messages API round stores the agent's whole last request
-- (hundreds of kilobytes at 150K tokens): pglz took about 2 ms of the
-- server's CPU per request of 300 KB, lz4 about 0.3 ms, and its output was
-- smaller. Reading back is faster too. Only values written from now on
-- are compressed the new way; what is stored stays readable as it is.
-- A server without lz4 keeps pglz: the migration says so and goes on.
-- +goose StatementBegin
DO $$
DECLARE
    col record;
BEGIN
    FOR col IN SELECT * FROM (VALUES
        ('agent_requests', 'body'), ('agent_requests', 'reply'),
        ('messages', 'content'), ('tool_results', 'content'),
        ('turns', 'payload'), ('outbox', 'payload'),
        ('content_replacements', 'replacement'),
        ('compactions', 'summary'), ('compactions', 'head'),
        ('session_notes', 'content')) AS c(tbl, name)
    LOOP
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I SET COMPRESSION lz4', col.tbl, col.name);
    END LOOP;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this Postgres has no lz4; large values stay compressed with pglz';
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    col record;
BEGIN
    FOR col IN SELECT * FROM (VALUES
        ('agent_requests', 'body'), ('agent_requests', 'reply'),
        ('messages', 'content'), ('tool_results', 'content'),
        ('turns', 'payload'), ('outbox', 'payload'),
        ('content_replacements', 'replacement'),
        ('compactions', 'summary'), ('compactions', 'head'),
        ('session_notes', 'content')) AS c(tbl, name)
    LOOP
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I SET COMPRESSION DEFAULT', col.tbl, col.name);
    END LOOP;
END
$$;
-- +goose StatementEnd
