-- +goose Up

-- The conversations the Messages API proxy follows under a client's session
-- id. A client sends its whole conversation with every request, and under
-- one session id it sends several: the main agent's, its subagents', side
-- calls, rewinds (an earlier point continued differently) and its own
-- compactions. Each is a thread, stored as a Mnemos session of its own
-- (thread_id; the main agent's first thread is the client's session id
-- itself), so each has its own messages, counts, thresholds and
-- compactions.
--
-- kind says how the thread began: main (the session's main agent), agent
-- (another agent: a subagent, a helper), side (a call that offers no
-- tools: a title, a summary), branch (a thread's conversation continued
-- differently from fork_position of parent_thread), client_compacted (the
-- client's own summary in place of its history). How many of the
-- conversation's messages the thread holds, and when it was last written,
-- are its session's (sessions.proxy_messages, updated_at).
CREATE TABLE proxy_threads (
    tenant_id     text        NOT NULL,
    session_id    text        NOT NULL,
    thread_id     text        NOT NULL,
    agent_id      text        NOT NULL,
    kind          text        NOT NULL CHECK (kind IN ('main', 'agent', 'side', 'branch', 'client_compacted')),
    parent_thread text,
    fork_position bigint,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, thread_id),
    FOREIGN KEY (tenant_id, thread_id) REFERENCES sessions (tenant_id, session_id) ON DELETE CASCADE
);
CREATE INDEX proxy_threads_session ON proxy_threads (tenant_id, session_id);

-- A thread's path: the digest of each of its messages chained over the
-- ones before it (and the client's session id), so one digest names a
-- whole conversation prefix. A request is placed by the longest prefix of
-- its own that some thread holds: one index probe per message.
CREATE TABLE proxy_paths (
    tenant_id text   NOT NULL,
    thread_id text   NOT NULL,
    position  bigint NOT NULL,
    digest    bytea  NOT NULL,
    PRIMARY KEY (tenant_id, thread_id, position),
    FOREIGN KEY (tenant_id, thread_id) REFERENCES proxy_threads ON DELETE CASCADE
);
CREATE INDEX proxy_paths_digest ON proxy_paths (tenant_id, digest);

SELECT mnemos_enforce_tenant_isolation();

-- +goose Down
DROP TABLE proxy_paths;
DROP TABLE proxy_threads;
