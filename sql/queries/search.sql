-- name: SearchCorpus :one
-- What a ranked search (pkg/store/search.go) counts its words' rarity
-- against: the documents, the scope's live memories (with_memories) and
-- the tenant's messages (with_messages), at least 1; and, parallel to
-- lexemes, how many of the scope's memories hold each.
SELECT greatest(
        (SELECT count(*) FROM memories c WHERE @with_memories::boolean AND c.tenant_id = @tenant_id AND c.scope = @scope AND c.deleted_at IS NULL)
        + (SELECT coalesce(sum(s.message_count), 0) FROM sessions s WHERE @with_messages::boolean AND s.tenant_id = @tenant_id),
        1)::float8 AS documents,
       coalesce((SELECT array_agg((SELECT count(*) FROM memory_terms c
                                   WHERE @with_memories::boolean AND c.tenant_id = @tenant_id AND c.scope = @scope AND c.lexeme = u.lexeme)
                                  ORDER BY u.ord)
                 FROM unnest(@lexemes::text[]) WITH ORDINALITY AS u(lexeme, ord)), '{}')::bigint[] AS memory_dfs;

-- name: SearchPostings :many
-- The postings a ranked search scores, each with the index of its lexeme
-- in lexemes (from 1): every posting of the scope's live memories
-- (with_memories) and, of each lexeme's messages in the sessions whose
-- memory_scope holds scope_filter (with_messages; of session_id alone
-- unless it is empty), the per_term of most impact, read in the key's
-- order, each checked against the scope's sessions by a hashed lookup
-- (the check stands in an OR, with "every session of the tenant is in the
-- scope", which keeps Postgres from making it a join and sorting what it
-- joined). Each comes with its document's recency: the memory's or the
-- session's last update.
WITH tenant_sessions AS MATERIALIZED (
    SELECT s.session_id, s.updated_at,
           s.memory_scope @> @scope_filter::jsonb AND (@session_id::text = '' OR s.session_id = @session_id::text) AS in_scope
    FROM sessions s
    WHERE @with_messages::boolean AND s.tenant_id = @tenant_id
), scope_sessions AS MATERIALIZED (
    SELECT t.session_id, t.updated_at FROM tenant_sessions t WHERE t.in_scope
)
SELECT l.ord::integer AS term, ''::text AS session_id, 0::bigint AS position, p.name, p.freq, p.len, m.updated_at
FROM unnest(@lexemes::text[]) WITH ORDINALITY AS l(lexeme, ord)
JOIN memory_terms p ON p.tenant_id = @tenant_id::text AND p.scope = @scope::text AND p.lexeme = l.lexeme
JOIN memories m ON m.tenant_id = @tenant_id::text AND m.scope = @scope::text AND m.name = p.name
WHERE @with_memories::boolean
UNION ALL
SELECT l.ord::integer, t.session_id, t.position, '', t.freq, t.len, s.updated_at
FROM unnest(@lexemes::text[]) WITH ORDINALITY AS l(lexeme, ord)
CROSS JOIN LATERAL (
    SELECT p.session_id, p.position, p.freq, p.len
    FROM message_terms p
    WHERE @with_messages::boolean AND p.tenant_id = @tenant_id::text AND p.lexeme = l.lexeme
      AND ((SELECT bool_and(a.in_scope) FROM tenant_sessions a) OR p.session_id IN (SELECT s.session_id FROM scope_sessions s))
    ORDER BY p.impact DESC
    LIMIT @per_term
) AS t
JOIN scope_sessions s ON s.session_id = t.session_id;

-- name: SearchCheck :many
-- Of the documents a ranked search ordered (parallel arrays, best first;
-- a memory names name, a message session_id and position), those that
-- match filter (a tsquery of the query's phrases and excluded words; one
-- empty or of stop words alone filters nothing), checked on the documents
-- themselves in that order until max_rows pass, each with its rank (its
-- index in the arrays, from 1), its role and its time: when the message
-- was stored or the memory last updated.
WITH f AS (
    SELECT q, numnode(q) = 0 AS none FROM to_tsquery('english'::regconfig, @filter::text) AS q
)
SELECT u.ord::integer AS rank, d.role::text AS role, d.at::timestamptz AS at
FROM f, ROWS FROM (unnest(@session_ids::text[]), unnest(@positions::bigint[]), unnest(@names::text[])) WITH ORDINALITY AS u(session_id, position, name, ord)
CROSS JOIN LATERAL (
    SELECT x.role, x.created_at AS at FROM messages x
    WHERE u.name = '' AND x.tenant_id = @tenant_id AND x.session_id = u.session_id AND x.position = u.position
      AND (f.none OR message_vector(x.content) @@ f.q)
    UNION ALL
    SELECT '', m.updated_at FROM memories m
    WHERE u.name <> '' AND m.tenant_id = @tenant_id AND m.scope = @scope AND m.name = u.name AND m.deleted_at IS NULL
      AND (f.none OR memory_vector(m.name, m.description, m.body) @@ f.q)
) AS d
LIMIT @max_rows;

-- name: SearchTermStats :many
-- The English lexemes of words (none for a stop word), each with the
-- number of the tenant's messages holding it, counted up to df_cap.
SELECT w.word::text AS word, l.lexeme::text AS lexeme,
       (SELECT count(*) FROM (SELECT 1 FROM message_terms c WHERE c.tenant_id = @tenant_id AND c.lexeme = l.lexeme LIMIT @df_cap) AS x)::bigint AS df
FROM unnest(@words::text[]) AS w(word)
CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector('english'::regconfig, w.word))) AS l(lexeme);

-- name: SearchMessageSnippets :many
-- The snippets of messages a search found: session_ids and positions are
-- parallel; the words of match stand between the options' markers.
SELECT m.session_id, m.position,
       ts_headline('english'::regconfig, left(message_text(m.content), 20000), to_tsquery('english'::regconfig, @match::text), @headline_options::text)::text AS snippet
FROM ROWS FROM (unnest(@session_ids::text[]), unnest(@positions::bigint[])) AS u(session_id, position)
JOIN messages m ON m.tenant_id = @tenant_id AND m.session_id = u.session_id AND m.position = u.position;

-- name: SearchMemorySnippets :many
-- The snippets of a scope's memories a search found.
SELECT m.name,
       ts_headline('english'::regconfig, left(m.description || E'\n' || m.body, 20000), to_tsquery('english'::regconfig, @match::text), @headline_options::text)::text AS snippet
FROM unnest(@names::text[]) AS u(name)
JOIN memories m ON m.tenant_id = @tenant_id AND m.scope = @scope AND m.name = u.name;
