-- +goose Up

-- The relay's functions plan their statements once per connection
-- (00030), and the plan is made on the outbox as its statistics show it:
-- empty, since the relay keeps it so. On an empty table a sequential scan
-- costs least, and the kept plan then read the whole table at every call,
-- with every row the relay deleted since the last vacuum (a fifth of
-- Postgres's CPU in the sustained ingest of `mnemos bench`,
-- docs/performance.md). Priced out here, both find their rows by the
-- outbox's key, whatever it held when they were planned.
ALTER FUNCTION mnemos_outbox_claim(integer) SET enable_seqscan = off;
ALTER FUNCTION mnemos_outbox_delete(bigint[]) SET enable_seqscan = off;

-- +goose Down

ALTER FUNCTION mnemos_outbox_claim(integer) RESET enable_seqscan;
ALTER FUNCTION mnemos_outbox_delete(bigint[]) RESET enable_seqscan;
