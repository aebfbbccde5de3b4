-- +goose Up

-- Session notes: one row per session from its first accounted turn on. The
-- row carries the notes themselves (content stays '' until the first
-- update), where the update gate measures from, the claim that lets one
-- update run at a time per session across every replica, and the marker
-- of a trailing run that requests arriving meanwhile were coalesced into.
ALTER TABLE session_notes
    ALTER COLUMN content SET DEFAULT '',
    ALTER COLUMN version SET DEFAULT 0,
    -- The position of last_summarized_uuid: the next update reads the
    -- messages after it.
    ADD COLUMN last_summarized_position bigint      NOT NULL DEFAULT -1,
    -- The highest turn seq the service has looked at (the compactor waits
    -- for it to reach the session's applied seq).
    ADD COLUMN seen_seq                 bigint      NOT NULL DEFAULT 0,
    -- Where the gate measures growth from: the session's state read by the
    -- last update or attempt (a failed or rejected one too), or the lower
    -- count a compaction left.
    ADD COLUMN mark_attempted           boolean     NOT NULL DEFAULT false,
    ADD COLUMN mark_seq                 bigint      NOT NULL DEFAULT 0,
    ADD COLUMN mark_tokens              bigint      NOT NULL DEFAULT 0,
    ADD COLUMN mark_tool_calls          bigint      NOT NULL DEFAULT 0,
    -- The running update: its owner and lease (renewed while it runs;
    -- taken over once it expires).
    ADD COLUMN update_owner             text        NOT NULL DEFAULT '',
    ADD COLUMN update_lease_until       timestamptz,
    -- A request that arrived while an update ran: the newest such turn.
    ADD COLUMN pending                  boolean     NOT NULL DEFAULT false,
    ADD COLUMN pending_seq              bigint      NOT NULL DEFAULT 0,
    ADD COLUMN pending_tokens           bigint      NOT NULL DEFAULT 0,
    ADD COLUMN pending_tool_calls_total bigint      NOT NULL DEFAULT 0,
    ADD COLUMN pending_tool_calls       integer     NOT NULL DEFAULT 0,
    -- Updates whose answer broke the notes' structure, and updates that failed.
    ADD COLUMN rejected_updates         bigint      NOT NULL DEFAULT 0,
    ADD COLUMN failed_updates           bigint      NOT NULL DEFAULT 0,
    ADD COLUMN last_error               text        NOT NULL DEFAULT '',
    ADD COLUMN llm_model                text        NOT NULL DEFAULT '',
    ADD COLUMN created_at               timestamptz NOT NULL DEFAULT now();

-- Trailing runs whose claim ran out (a crashed worker): the sweep finds them.
CREATE INDEX session_notes_pending ON session_notes (update_lease_until) WHERE pending;

-- +goose Down
DROP INDEX session_notes_pending;
ALTER TABLE session_notes
    ALTER COLUMN content DROP DEFAULT,
    ALTER COLUMN version SET DEFAULT 1,
    DROP COLUMN last_summarized_position,
    DROP COLUMN seen_seq,
    DROP COLUMN mark_attempted,
    DROP COLUMN mark_seq,
    DROP COLUMN mark_tokens,
    DROP COLUMN mark_tool_calls,
    DROP COLUMN update_owner,
    DROP COLUMN update_lease_until,
    DROP COLUMN pending,
    DROP COLUMN pending_seq,
    DROP COLUMN pending_tokens,
    DROP COLUMN pending_tool_calls_total,
    DROP COLUMN pending_tool_calls,
    DROP COLUMN rejected_updates,
    DROP COLUMN failed_updates,
    DROP COLUMN last_error,
    DROP COLUMN llm_model,
    DROP COLUMN created_at;
