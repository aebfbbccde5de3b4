-- +goose Up

-- The agent's proxied rounds priced (issue 62). Every round the proxy
-- relays is recorded in llm_usage under the task 'proxy', at what it cost
-- through Mnemos (cost_nanousd), beside what the same round would have
-- cost sent straight to the upstream (straight_nanousd), as
-- docs/proxy-cost.md defines it. Mnemos's own calls have no straight
-- counterpart: they keep 0.
ALTER TABLE llm_usage
    ADD COLUMN straight_nanousd bigint NOT NULL DEFAULT 0 CHECK (straight_nanousd >= 0);

-- Each thread's proxied rounds (a thread is a session of its own): how
-- many were priced and what they cost through Mnemos and straight, and
-- what the straight run's last request held (proxy_straight_input, in
-- tokens) and when it was sent (proxy_priced_at): the next round's
-- straight estimate reads that prefix from the cache. Erased with the
-- session.
ALTER TABLE sessions
    ADD COLUMN proxy_priced_rounds    bigint NOT NULL DEFAULT 0,
    ADD COLUMN proxy_cost_nanousd     bigint NOT NULL DEFAULT 0 CHECK (proxy_cost_nanousd >= 0),
    ADD COLUMN proxy_straight_nanousd bigint NOT NULL DEFAULT 0 CHECK (proxy_straight_nanousd >= 0),
    ADD COLUMN proxy_straight_input   bigint NOT NULL DEFAULT 0,
    ADD COLUMN proxy_priced_at        timestamptz;

-- +goose Down
ALTER TABLE sessions
    DROP COLUMN proxy_priced_at,
    DROP COLUMN proxy_straight_input,
    DROP COLUMN proxy_straight_nanousd,
    DROP COLUMN proxy_cost_nanousd,
    DROP COLUMN proxy_priced_rounds;
ALTER TABLE llm_usage DROP COLUMN straight_nanousd;
