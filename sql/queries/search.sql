-- name: SearchScopeCandidates :many
-- Ranked search (pkg/search): BM25 over the inverted indexes of 00043, of
-- a scope's live memories (with_memories) and the messages of the sessions
-- whose memory_scope holds scope_filter (with_messages; of session_id
-- alone unless it is empty), as one collection. The words are stemmed here
-- (lexemes, stemmed by SearchTermStats); any of them may match. A
-- document scores, for each query lexeme it holds,
--   idf * freq * (k1 + 1) / (freq + k1 * (1 - b + b * len / avglen))
-- with k1 = 1.2, b = 0.75, idf = ln(1 + (n - df + 0.5) / (df + 0.5)), and
-- avglen the mean length of the matching documents of its source. Rarity
-- is the tenant's: n counts the tenant's messages and the scope's
-- memories, df those holding the lexeme (the tenant's messages as
-- message_dfs gives them, parallel to lexemes). A memory's freq weighs its name 3, its description 2 and
-- its body 1. Of a lexeme's messages in the scope, the per_term of most
-- impact are read (all of them when fewer): in the key's order, each
-- checked against the scope's sessions by a hashed lookup (the check
-- stands in an OR, with "every session of the tenant is in the scope",
-- which keeps Postgres from making it a join and sorting what it joined). Equal scores go to the more
-- recently updated memory or session, then to the later message. The
-- filter (a tsquery of the query's phrases and excluded words; empty for
-- none) is checked on the documents themselves, best first, until
-- max_rows pass: the answer comes in that order.
WITH lexemes AS (
    SELECT u.lexeme, u.df FROM ROWS FROM (unnest(@lexemes::text[]), unnest(@message_dfs::bigint[])) AS u(lexeme, df)
), tenant_sessions AS MATERIALIZED (
    SELECT s.session_id, s.message_count, s.updated_at,
           s.memory_scope @> @scope_filter::jsonb AND (@session_id::text = '' OR s.session_id = @session_id::text) AS in_scope
    FROM sessions s
    WHERE @with_messages::boolean AND s.tenant_id = @tenant_id
), scope_sessions AS MATERIALIZED (
    SELECT t.session_id, t.updated_at FROM tenant_sessions t WHERE t.in_scope
), terms AS MATERIALIZED (
    SELECT l.lexeme,
           CASE WHEN @with_messages::boolean THEN l.df ELSE 0 END
           + (SELECT count(*) FROM memory_terms c WHERE @with_memories::boolean AND c.tenant_id = @tenant_id AND c.scope = @scope AND c.lexeme = l.lexeme) AS df
    FROM lexemes l
), documents AS (
    SELECT greatest(
        (SELECT count(*) FROM memories c WHERE @with_memories::boolean AND c.tenant_id = @tenant_id AND c.scope = @scope AND c.deleted_at IS NULL)
        + coalesce((SELECT sum(message_count) FROM tenant_sessions), 0), 1)::float8 AS n
), postings AS MATERIALIZED (
    SELECT 'memory' AS source, p.lexeme, '' AS session_id, 0::bigint AS position, p.name, p.freq, p.len, NULL::timestamptz AS updated_at
    FROM lexemes l
    JOIN memory_terms p ON p.tenant_id = @tenant_id AND p.scope = @scope AND p.lexeme = l.lexeme
    WHERE @with_memories::boolean
    UNION ALL
    SELECT 'message', l.lexeme, t.session_id, t.position, '', t.freq, t.len, s.updated_at
    FROM lexemes l
    CROSS JOIN LATERAL (
        SELECT p.session_id, p.position, p.freq, p.len
        FROM message_terms p
        WHERE @with_messages::boolean AND p.tenant_id = @tenant_id AND p.lexeme = l.lexeme
          AND ((SELECT bool_and(a.in_scope) FROM tenant_sessions a) OR p.session_id IN (SELECT s.session_id FROM scope_sessions s))
        ORDER BY p.impact DESC
        LIMIT @per_term
    ) AS t
    JOIN scope_sessions s ON s.session_id = t.session_id
), lengths AS (
    SELECT p.source, greatest(avg(p.len), 1)::float8 AS avglen FROM postings p GROUP BY p.source
), ranked AS (
    SELECT p.source, p.session_id, p.position, p.name, max(p.updated_at) AS updated_at,
           sum(ln(1 + (d.n - t.df + 0.5) / (t.df + 0.5)) * p.freq * 2.2 / (p.freq + 1.2 * (0.25 + 0.75 * p.len / g.avglen)))::float8 AS score
    FROM postings p JOIN terms t ON t.lexeme = p.lexeme JOIN lengths g ON g.source = p.source CROSS JOIN documents d
    GROUP BY p.source, p.session_id, p.position, p.name
), ordered AS (
    SELECT r.source, r.session_id, r.position, r.name, r.score, coalesce(r.updated_at, m.updated_at) AS recency
    FROM ranked r
    LEFT JOIN memories m ON r.source = 'memory' AND m.tenant_id = @tenant_id AND m.scope = @scope AND m.name = r.name
    ORDER BY r.score DESC, recency DESC, r.position DESC
)
SELECT o.source::text AS source, o.session_id::text AS session_id, o.position::bigint AS position, o.name::text AS name,
       o.score::float8 AS score, d.role::text AS role, d.at::timestamptz AS at
FROM ordered o
CROSS JOIN LATERAL (
    SELECT x.role, x.created_at AS at FROM messages x
    WHERE o.source = 'message' AND x.tenant_id = @tenant_id AND x.session_id = o.session_id AND x.position = o.position
      AND (@filter::text = '' OR message_vector(x.content) @@ to_tsquery('english'::regconfig, @filter::text))
    UNION ALL
    SELECT '', m.updated_at FROM memories m
    WHERE o.source = 'memory' AND m.tenant_id = @tenant_id AND m.scope = @scope AND m.name = o.name AND m.deleted_at IS NULL
      AND (@filter::text = '' OR memory_vector(m.name, m.description, m.body) @@ to_tsquery('english'::regconfig, @filter::text))
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
