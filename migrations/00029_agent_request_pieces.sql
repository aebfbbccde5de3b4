-- +goose Up

-- A session's last agent request (00024) in pieces of a fixed size, each
-- with its digest, so that a round writes only the pieces whose bytes
-- changed. A round's request is the round before's with the new messages
-- appended and the last message's cache breakpoint moved: at 150K tokens
-- the two share all but the last few kilobytes of 600 at the same offsets,
-- and writing the whole body again each round (its TOAST rows, their WAL)
-- was the largest part of Postgres's work in a proxied round. A request
-- stored before this migration keeps its whole body in agent_requests.body
-- (pieces 0); one stored in pieces has an empty body there.
CREATE TABLE agent_request_pieces (
    tenant_id  text    NOT NULL,
    session_id text    NOT NULL,
    idx        integer NOT NULL,
    digest     bytea   NOT NULL,
    body       bytea   NOT NULL,
    PRIMARY KEY (tenant_id, session_id, idx),
    FOREIGN KEY (tenant_id, session_id) REFERENCES agent_requests ON DELETE CASCADE
);

ALTER TABLE agent_requests ADD COLUMN pieces integer NOT NULL DEFAULT 0;

-- +goose StatementBegin
DO $$
BEGIN
    ALTER TABLE agent_request_pieces ALTER COLUMN body SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this Postgres has no lz4; agent request pieces are compressed with pglz';
END
$$;
-- +goose StatementEnd

SELECT mnemos_enforce_tenant_isolation();

-- +goose Down
UPDATE agent_requests r SET body = COALESCE((
    SELECT string_agg(p.body, ''::bytea ORDER BY p.idx) FROM agent_request_pieces p
    WHERE p.tenant_id = r.tenant_id AND p.session_id = r.session_id AND p.idx < r.pieces), ''::bytea)
WHERE r.pieces > 0;
DROP TABLE agent_request_pieces;
ALTER TABLE agent_requests DROP COLUMN pieces;
