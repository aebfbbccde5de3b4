-- +goose Up

-- The text-search index on messages (00005) was kept up by every insert
-- and read by no search. The services search as their own role, under
-- row-level security, and Postgres does not let a condition whose function
-- is not leakproof (a text search's match is not) stand in an index's
-- condition ahead of the policy's: under the policy a search reads the
-- session's messages (MessageSearchSession), or the scope's sessions'
-- (MessageSearch), by their btree and matches each row. The index's cost
-- was all on the writes: its expression, message_text, a SQL function with
-- a FROM clause, which Postgres cannot inline, was set up (its body parsed
-- and planned) in every statement inserting messages and run for each row,
-- and an accountant's batch inserts all its messages in one statement.
--
-- The searches now match by message_search, one expression, which Postgres
-- inlines: the strings of the message's text blocks as a jsonb array, made
-- a tsvector. The same blocks are searched as before (what the user and the
-- agent said; tool calls, tool results and thinking left out); each block
-- is its own document in the vector, so a phrase no longer matches across
-- two blocks. message_text stays, for the snippets of what matched.
-- A search that needs an index (across every session of a tenant) would
-- run as a SECURITY DEFINER function, as the owner, where the index serves.
-- +goose StatementBegin
CREATE FUNCTION message_search(content jsonb) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT to_tsvector('simple'::regconfig, jsonb_path_query_array(content, 'strict $[*] ? (@.type == "text").text'))
$$;
-- +goose StatementEnd

DROP INDEX messages_text_search;

-- +goose Down

CREATE INDEX messages_text_search ON messages USING gin (to_tsvector('simple', message_text(content)));
DROP FUNCTION message_search(jsonb);
