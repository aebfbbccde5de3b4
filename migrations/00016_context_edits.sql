-- +goose Up
-- The decisions of context-management edits (POST /v1/sessions/{id}/context
-- with "context_management"), recorded once like micro-compaction's so the
-- next request makes the same cut: clear_tool_uses (a tool result cleared,
-- by tool_use id), clear_tool_input (a tool_use's input cleared, by
-- tool_use id) and clear_thinking (an assistant message's thinking blocks
-- dropped; tool_use_id then holds the message's uuid).
ALTER TABLE content_replacements DROP CONSTRAINT content_replacements_kind_check;
ALTER TABLE content_replacements ADD CONSTRAINT content_replacements_kind_check
    CHECK (kind IN ('offload', 'microcompact', 'clear_tool_uses', 'clear_tool_input', 'clear_thinking'));

-- +goose Down
DELETE FROM content_replacements WHERE kind IN ('clear_tool_uses', 'clear_tool_input', 'clear_thinking');
ALTER TABLE content_replacements DROP CONSTRAINT content_replacements_kind_check;
ALTER TABLE content_replacements ADD CONSTRAINT content_replacements_kind_check CHECK (kind IN ('offload', 'microcompact'));
