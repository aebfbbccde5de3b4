-- +goose Up
-- A compaction resets what recall has shown a session, with its byte
-- budget: a memory shown before it may be shown again after it, since the
-- context that held it is gone. A memory is recorded once per compaction.
ALTER TABLE recall_surfaced DROP CONSTRAINT recall_surfaced_pkey;
ALTER TABLE recall_surfaced ADD PRIMARY KEY (tenant_id, session_id, compaction_id, scope, name);

-- +goose Down
DELETE FROM recall_surfaced r USING recall_surfaced e
WHERE r.tenant_id = e.tenant_id AND r.session_id = e.session_id AND r.scope = e.scope AND r.name = e.name
  AND (r.surfaced_at, r.compaction_id) > (e.surfaced_at, e.compaction_id);
ALTER TABLE recall_surfaced DROP CONSTRAINT recall_surfaced_pkey;
ALTER TABLE recall_surfaced ADD PRIMARY KEY (tenant_id, session_id, scope, name);
