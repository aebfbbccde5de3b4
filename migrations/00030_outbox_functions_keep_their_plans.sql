-- +goose Up

-- The relay's two functions, in PL/pgSQL. A SQL function that is not
-- inlined (these run as their owner, so never are) parses and plans its
-- body at every call; PL/pgSQL plans each statement once per connection and
-- keeps the plan. The relay calls both in every round it makes, and the
-- parsing and planning of their bodies took about 5 % of Postgres's CPU in
-- rounds through the Messages API proxy (`mnemos bench`,
-- docs/performance.md). What they do is unchanged.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION mnemos_outbox_claim(max_rows integer) RETURNS SETOF outbox
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    RETURN QUERY SELECT * FROM outbox ORDER BY id LIMIT max_rows FOR UPDATE SKIP LOCKED;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION mnemos_outbox_delete(ids bigint[]) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    DELETE FROM outbox WHERE id = ANY(ids);
END
$$;
-- +goose StatementEnd

-- +goose Down

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION mnemos_outbox_claim(max_rows integer) RETURNS SETOF outbox
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT * FROM outbox ORDER BY id LIMIT max_rows FOR UPDATE SKIP LOCKED
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION mnemos_outbox_delete(ids bigint[]) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    DELETE FROM outbox WHERE id = ANY(ids)
$$;
-- +goose StatementEnd
