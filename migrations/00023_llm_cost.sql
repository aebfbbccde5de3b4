-- +goose Up

-- What model calls cost (issue 21, "Money"), in nano-dollars (10^-9 USD):
-- an exact integer, priced per call by the tenant's price table when the
-- call is recorded. Rows recorded before this migration keep 0: what their
-- calls cost depended on prices (the tenant's own among them) this
-- migration cannot know, and a guess would read as a measurement.
ALTER TABLE llm_usage
    ADD COLUMN cost_nanousd bigint NOT NULL DEFAULT 0 CHECK (cost_nanousd >= 0);

-- +goose Down
ALTER TABLE llm_usage DROP COLUMN cost_nanousd;
