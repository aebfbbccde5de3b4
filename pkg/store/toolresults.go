package store

import (
	"context"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// ToolResult is a tool result kept whole outside the context.
type ToolResult struct {
	ID          string
	SessionID   string
	MessageUUID string
	ToolUseID   string
	Content     string
	SizeChars   int64
	CreatedAt   time.Time
}

// InsertToolResult stores a tool result; storing the same tool_use_id twice is a no-op.
func (t *Tx) InsertToolResult(ctx context.Context, r ToolResult) error {
	err := t.q.ToolResultInsert(ctx, dbsqlc.ToolResultInsertParams{
		TenantID: t.tenant, ID: r.ID, SessionID: r.SessionID, MessageUuid: r.MessageUUID,
		ToolUseID: r.ToolUseID, Content: r.Content, SizeChars: r.SizeChars,
	})
	if err != nil {
		return fmt.Errorf("store.InsertToolResult: %w", err)
	}
	return nil
}

// ToolResult reads a stored tool result by id.
func (t *Tx) ToolResult(ctx context.Context, id string) (ToolResult, error) {
	r, err := t.q.ToolResultGet(ctx, dbsqlc.ToolResultGetParams{TenantID: t.tenant, ID: id})
	if err != nil {
		return ToolResult{}, notFound(err)
	}
	return ToolResult{
		ID: r.ID, SessionID: r.SessionID, MessageUUID: r.MessageUuid, ToolUseID: r.ToolUseID,
		Content: r.Content, SizeChars: r.SizeChars, CreatedAt: r.CreatedAt.Time,
	}, nil
}

// Replacement kinds.
const (
	ReplaceOffload      = "offload"
	ReplaceMicrocompact = "microcompact"
	// The decisions of context-management edits (pkg/context/ctxedit): a tool
	// result cleared and a tool_use's input cleared, by tool_use id, and an
	// assistant message's thinking dropped, by the message's uuid (held in
	// ToolUseID).
	ReplaceClearToolUses  = "clear_tool_uses"
	ReplaceClearToolInput = "clear_tool_input"
	ReplaceClearThinking  = "clear_thinking"
)

// Replacement is a frozen decision to show other content for a tool result.
type Replacement struct {
	SessionID    string
	ToolUseID    string
	Kind         string
	ToolResultID string
	Text         string
	DecidedAt    time.Time
}

// ReplacementsFor returns the decisions of one kind recorded for any of the
// given tool_use ids, by id.
func (t *Tx) ReplacementsFor(ctx context.Context, sessionID, kind string, toolUseIDs []string) (map[string]Replacement, error) {
	rows, err := t.q.ReplacementsFor(ctx, dbsqlc.ReplacementsForParams{TenantID: t.tenant, SessionID: sessionID, Kind: kind, ToolUseIds: toolUseIDs})
	if err != nil {
		return nil, fmt.Errorf("store.ReplacementsFor: %w", err)
	}
	out := make(map[string]Replacement, len(rows))
	for _, r := range rows {
		out[r.ToolUseID] = toReplacement(r)
	}
	return out, nil
}

// ReplacementsOf is ReplacementsFor for the turns of many sessions at once:
// sessionIDs and toolUseIDs are parallel. It returns the decisions by
// session, then by tool use id.
func (t *Tx) ReplacementsOf(ctx context.Context, kind string, sessionIDs, toolUseIDs []string) (map[string]map[string]Replacement, error) {
	rows, err := t.q.ReplacementsForSessions(ctx, dbsqlc.ReplacementsForSessionsParams{TenantID: t.tenant, SessionIds: sessionIDs, ToolUseIds: toolUseIDs, Kind: kind})
	if err != nil {
		return nil, fmt.Errorf("store.ReplacementsOf: %w", err)
	}
	out := map[string]map[string]Replacement{}
	for _, r := range rows {
		if out[r.SessionID] == nil {
			out[r.SessionID] = map[string]Replacement{}
		}
		out[r.SessionID][r.ToolUseID] = toReplacement(r)
	}
	return out, nil
}

// Replacements lists a session's decisions in the order they were made.
func (t *Tx) Replacements(ctx context.Context, sessionID string) ([]Replacement, error) {
	rows, err := t.q.ReplacementListBySession(ctx, dbsqlc.ReplacementListBySessionParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return nil, fmt.Errorf("store.Replacements: %w", err)
	}
	out := make([]Replacement, 0, len(rows))
	for _, r := range rows {
		out = append(out, toReplacement(r))
	}
	return out, nil
}

// RecordReplacement records a decision; the first decision for a tool result stands.
func (t *Tx) RecordReplacement(ctx context.Context, r Replacement) error {
	var id *string
	if r.ToolResultID != "" {
		id = &r.ToolResultID
	}
	err := t.q.ReplacementInsert(ctx, dbsqlc.ReplacementInsertParams{
		TenantID: t.tenant, SessionID: r.SessionID, ToolUseID: r.ToolUseID, Kind: r.Kind,
		ToolResultID: id, Replacement: r.Text,
	})
	if err != nil {
		return fmt.Errorf("store.RecordReplacement: %w", err)
	}
	return nil
}

func toReplacement(r dbsqlc.ContentReplacement) Replacement {
	out := Replacement{SessionID: r.SessionID, ToolUseID: r.ToolUseID, Kind: r.Kind, Text: r.Replacement, DecidedAt: r.DecidedAt.Time}
	if r.ToolResultID != nil {
		out.ToolResultID = *r.ToolResultID
	}
	return out
}
