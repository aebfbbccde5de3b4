-- +goose Up
-- When a session's open compaction circuit may be tried again: the first
-- automatic compaction after it asks the model once more (half-open); an
-- answer closes the circuit, a failure opens it for another cool-down.
-- NULL while closed (and for circuits opened before this column existed,
-- which are tried at once).
ALTER TABLE sessions ADD COLUMN compact_circuit_until timestamptz;

-- +goose Down
ALTER TABLE sessions DROP COLUMN compact_circuit_until;
