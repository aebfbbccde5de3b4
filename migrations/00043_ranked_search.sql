-- +goose Up

-- Ranked search over a scope's memories and the messages of its sessions
-- (pkg/search). Row-level security is forced on every tenant table, for the
-- owner too, and Postgres keeps a condition whose function is not
-- leakproof out of an index's condition while a policy applies: a text
-- match (@@), a GIN index's array or jsonb operators, none of them are
-- leakproof, so no GIN index serves a search as the services run it. Text
-- equality is leakproof: a btree finds rows by it under the policies.
--
-- So the search keeps inverted indexes as tables, one row per word (an
-- English-stemmed lexeme) and document, each with the word's frequency in
-- it and the document's length (its number of distinct lexemes): what a
-- BM25 ranking needs, read by the primary key's index alone. Triggers keep
-- them in step with the documents, whoever writes them (the accountant,
-- imports, erasures, retention), in the same statement.
--
-- A message's postings are keyed by their impact after the lexeme: the
-- term's BM25 weight in the message for a message length of 24 lexemes,
-- times 1,000 (message_term_impact), so that a search reads a common
-- word's strongest postings first and stops after a bound, as a search
-- engine's impact-ordered index does.

-- The English lexemes of a message: the strings of its text blocks, as
-- message_search reads them (what the user and the agent said; tool
-- calls, tool results and thinking left out). Postgres inlines it.
-- +goose StatementBegin
CREATE FUNCTION message_vector(content jsonb) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT to_tsvector('english'::regconfig, jsonb_path_query_array(content, 'strict $[*] ? (@.type == "text").text'))
$$;
-- +goose StatementEnd

-- The English lexemes of a memory, weighted by field: its name (its '-'
-- and '_' read as spaces) A, its description B, its body C.
-- +goose StatementBegin
CREATE FUNCTION memory_vector(name text, description text, body text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT setweight(to_tsvector('english'::regconfig, translate(name, '-_', '  ')), 'A')
        || setweight(to_tsvector('english'::regconfig, description), 'B')
        || setweight(to_tsvector('english'::regconfig, body), 'C')
$$;
-- +goose StatementEnd

-- A memory's frequency of one lexeme, its fields weighted: a name's
-- occurrence counts 3, a description's 2, a body's 1.
-- +goose StatementBegin
CREATE FUNCTION memory_term_freq(weights text[]) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(sum(CASE w WHEN 'A' THEN 3 WHEN 'B' THEN 2 ELSE 1 END), 0)::integer FROM unnest(weights) AS w
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION message_term_impact(freq integer, len integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT (1000 * freq * 2.2 / (freq + 1.2 * (0.25 + 0.75 * len / 24.0)))::integer
$$;
-- +goose StatementEnd

CREATE TABLE message_terms (
    tenant_id  text    NOT NULL,
    lexeme     text    NOT NULL,
    impact     integer NOT NULL,
    session_id text    NOT NULL,
    position   bigint  NOT NULL,
    freq       integer NOT NULL,
    len        integer NOT NULL,
    PRIMARY KEY (tenant_id, lexeme, impact, session_id, position) INCLUDE (freq, len)
);

CREATE TABLE memory_terms (
    tenant_id text    NOT NULL,
    scope     text    NOT NULL,
    lexeme    text    NOT NULL,
    name      text    NOT NULL,
    freq      integer NOT NULL,
    len       integer NOT NULL,
    PRIMARY KEY (tenant_id, scope, lexeme, name) INCLUDE (freq, len)
);

-- +goose StatementBegin
CREATE FUNCTION message_terms_insert() RETURNS trigger
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
BEGIN
    INSERT INTO message_terms (tenant_id, lexeme, impact, session_id, position, freq, len)
    SELECT n.tenant_id, u.lexeme, message_term_impact(coalesce(cardinality(u.positions), 1), length(n.v)), n.session_id, n.position,
           coalesce(cardinality(u.positions), 1), length(n.v)
    FROM (SELECT tenant_id, session_id, position, message_vector(content) AS v FROM inserted_messages) AS n
    CROSS JOIN LATERAL unnest(n.v) AS u
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION message_terms_delete() RETURNS trigger
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
BEGIN
    DELETE FROM message_terms p
    USING (SELECT o.tenant_id, o.session_id, o.position, u.lexeme, message_term_impact(coalesce(cardinality(u.positions), 1), length(o.v)) AS impact
           FROM (SELECT tenant_id, session_id, position, message_vector(content) AS v FROM deleted_messages) AS o
           CROSS JOIN LATERAL unnest(o.v) AS u) AS d
    WHERE p.tenant_id = d.tenant_id AND p.lexeme = d.lexeme AND p.impact = d.impact
      AND p.session_id = d.session_id AND p.position = d.position;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- A message's content changes only in repairs: its words are indexed anew.
-- +goose StatementBegin
CREATE FUNCTION message_terms_update() RETURNS trigger
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
BEGIN
    DELETE FROM message_terms p
    USING (SELECT u.lexeme, message_term_impact(coalesce(cardinality(u.positions), 1), length(o.v)) AS impact
           FROM (SELECT message_vector(OLD.content) AS v) AS o CROSS JOIN LATERAL unnest(o.v) AS u) AS d
    WHERE p.tenant_id = OLD.tenant_id AND p.lexeme = d.lexeme AND p.impact = d.impact
      AND p.session_id = OLD.session_id AND p.position = OLD.position;
    INSERT INTO message_terms (tenant_id, lexeme, impact, session_id, position, freq, len)
    SELECT NEW.tenant_id, u.lexeme, message_term_impact(coalesce(cardinality(u.positions), 1), length(n.v)), NEW.session_id, NEW.position,
           coalesce(cardinality(u.positions), 1), length(n.v)
    FROM (SELECT message_vector(NEW.content) AS v) AS n CROSS JOIN LATERAL unnest(n.v) AS u
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER message_terms_insert AFTER INSERT ON messages
    REFERENCING NEW TABLE AS inserted_messages FOR EACH STATEMENT EXECUTE FUNCTION message_terms_insert();
CREATE TRIGGER message_terms_delete AFTER DELETE ON messages
    REFERENCING OLD TABLE AS deleted_messages FOR EACH STATEMENT EXECUTE FUNCTION message_terms_delete();
CREATE TRIGGER message_terms_update AFTER UPDATE ON messages
    FOR EACH ROW WHEN (OLD.content IS DISTINCT FROM NEW.content OR OLD.position <> NEW.position)
    EXECUTE FUNCTION message_terms_update();

-- A live memory's lexemes are indexed; a deleted one's are not.
-- +goose StatementBegin
CREATE FUNCTION memory_terms_sync() RETURNS trigger
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        DELETE FROM memory_terms
        WHERE tenant_id = OLD.tenant_id AND scope = OLD.scope
          AND lexeme = ANY(tsvector_to_array(memory_vector(OLD.name, OLD.description, OLD.body))) AND name = OLD.name;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.deleted_at IS NULL THEN
        INSERT INTO memory_terms (tenant_id, scope, lexeme, name, freq, len)
        SELECT NEW.tenant_id, NEW.scope, t.lexeme, NEW.name, memory_term_freq(t.weights), length(v.v)
        FROM (SELECT memory_vector(NEW.name, NEW.description, NEW.body) AS v) AS v CROSS JOIN LATERAL unnest(v.v) AS t
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER memory_terms_sync AFTER INSERT OR DELETE OR UPDATE OF scope, name, description, body, deleted_at ON memories
    FOR EACH ROW EXECUTE FUNCTION memory_terms_sync();

-- What is stored already: the migration runs as the owner, no tenant set.
INSERT INTO message_terms (tenant_id, lexeme, impact, session_id, position, freq, len)
SELECT n.tenant_id, u.lexeme, message_term_impact(coalesce(cardinality(u.positions), 1), length(n.v)), n.session_id, n.position,
       coalesce(cardinality(u.positions), 1), length(n.v)
FROM (SELECT tenant_id, session_id, position, message_vector(content) AS v FROM messages) AS n
CROSS JOIN LATERAL unnest(n.v) AS u;

INSERT INTO memory_terms (tenant_id, scope, lexeme, name, freq, len)
SELECT m.tenant_id, m.scope, t.lexeme, m.name, memory_term_freq(t.weights), length(m.v)
FROM (SELECT tenant_id, scope, name, memory_vector(name, description, body) AS v FROM memories WHERE deleted_at IS NULL) AS m
CROSS JOIN LATERAL unnest(m.v) AS t;

SELECT mnemos_enforce_tenant_isolation();

-- +goose Down
DROP TRIGGER memory_terms_sync ON memories;
DROP TRIGGER message_terms_update ON messages;
DROP TRIGGER message_terms_delete ON messages;
DROP TRIGGER message_terms_insert ON messages;
DROP FUNCTION memory_terms_sync();
DROP FUNCTION message_terms_update();
DROP FUNCTION message_terms_delete();
DROP FUNCTION message_terms_insert();
DROP TABLE memory_terms;
DROP TABLE message_terms;
DROP FUNCTION message_term_impact(integer, integer);
DROP FUNCTION memory_term_freq(text[]);
DROP FUNCTION memory_vector(text, text, text);
DROP FUNCTION message_vector(jsonb);
