-- +goose Up
-- The seqs of the turns that asked for the session's latest automatic
-- compactions (at most compaction.thrash_compactions of them, oldest
-- first): the thrash guard asks for no more while that many fall within
-- the last compaction.thrash_turns turns. thrash_held counts the turns it
-- held back a compaction the session was due.
ALTER TABLE sessions
    ADD COLUMN auto_compact_seqs bigint[] NOT NULL DEFAULT '{}',
    ADD COLUMN thrash_held bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE sessions DROP COLUMN auto_compact_seqs, DROP COLUMN thrash_held;
