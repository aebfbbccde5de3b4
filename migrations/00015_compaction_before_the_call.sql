-- +goose Up
-- A compaction a caller asked for before its next model call (preflight
-- with "compact": true), because the count with the input it is about to
-- send crosses the auto-compact threshold.
ALTER TABLE compactions DROP CONSTRAINT compactions_trigger_check;
ALTER TABLE compactions ADD CONSTRAINT compactions_trigger_check CHECK (trigger IN ('auto', 'manual', 'preflight'));

-- +goose Down
UPDATE compactions SET trigger = 'auto' WHERE trigger = 'preflight';
ALTER TABLE compactions DROP CONSTRAINT compactions_trigger_check;
ALTER TABLE compactions ADD CONSTRAINT compactions_trigger_check CHECK (trigger IN ('auto', 'manual'));
