package store

import (
	"context"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// Message is one stored conversation message. Content is the Anthropic
// content-block array as JSON, after any content replacement.
type Message struct {
	SessionID      string
	UUID           string
	Position       int64
	Seq            int64
	Role           string
	Content        []byte
	ContentHash    []byte
	EstimateTokens int64
	IsResponse     bool
	StopReason     string
	// BytesThrough is the running total of MessageSize over the session's
	// messages up to and including this one (ContextSize reads it).
	BytesThrough int64
	CreatedAt    time.Time
}

// MessageSize is what a message counts towards the size of a context: the
// length of its content, or four bytes per estimated token when that is
// more (content that holds more than its JSON shows).
func MessageSize(content []byte, estimateTokens int64) int64 {
	return max(int64(len(content)), 4*estimateTokens)
}

// MessageHashes returns the content hashes of those of uuids the session holds.
func (t *Tx) MessageHashes(ctx context.Context, sessionID string, uuids []string) (map[string][]byte, error) {
	rows, err := t.q.MessageHashes(ctx, dbsqlc.MessageHashesParams{TenantID: t.tenant, SessionID: sessionID, Uuids: uuids})
	if err != nil {
		return nil, fmt.Errorf("store.MessageHashes: %w", err)
	}
	out := make(map[string][]byte, len(rows))
	for _, r := range rows {
		out[r.Uuid] = r.ContentHash
	}
	return out, nil
}

// InsertMessage stores a message at its position. It reports false, and
// stores nothing, when the session holds a message with that uuid already.
func (t *Tx) InsertMessage(ctx context.Context, m Message) (bool, error) {
	n, err := t.q.MessageInsert(ctx, dbsqlc.MessageInsertParams{
		TenantID:       t.tenant,
		SessionID:      m.SessionID,
		Uuid:           m.UUID,
		Position:       m.Position,
		Seq:            m.Seq,
		Role:           m.Role,
		Content:        m.Content,
		ContentHash:    m.ContentHash,
		EstimateTokens: m.EstimateTokens,
		IsResponse:     m.IsResponse,
		StopReason:     m.StopReason,
		BytesThrough:   m.BytesThrough,
	})
	if err != nil {
		return false, fmt.Errorf("store.InsertMessage %s: %w", m.UUID, err)
	}
	return n == 1, nil
}

// Messages lists a session's messages in order.
func (t *Tx) Messages(ctx context.Context, sessionID string) ([]Message, error) {
	rows, err := t.q.MessageListBySession(ctx, dbsqlc.MessageListBySessionParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return nil, fmt.Errorf("store.Messages: %w", err)
	}
	out := make([]Message, 0, len(rows))
	for _, r := range rows {
		out = append(out, toMessage(r))
	}
	return out, nil
}

func toMessage(r dbsqlc.Message) Message {
	return Message{
		SessionID: r.SessionID, UUID: r.Uuid, Position: r.Position, Seq: r.Seq, Role: r.Role,
		Content: r.Content, ContentHash: r.ContentHash, EstimateTokens: r.EstimateTokens,
		IsResponse: r.IsResponse, StopReason: r.StopReason, BytesThrough: r.BytesThrough, CreatedAt: r.CreatedAt.Time,
	}
}

// SearchSessionMessages runs a full-text search (web-search syntax, as
// SearchMessages) over one session's stored messages, those a compaction
// summarized included, in the order they were stored, at most limit hits.
// options are ts_headline's. A hit's SessionID is sessionID.
func (t *Tx) SearchSessionMessages(ctx context.Context, sessionID, query, options string, limit int) ([]MessageHit, error) {
	rows, err := t.q.MessageSearchSession(ctx, dbsqlc.MessageSearchSessionParams{
		TenantID: t.tenant, SessionID: sessionID, Query: query, HeadlineOptions: options, MaxRows: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("store.SearchSessionMessages: %w", err)
	}
	out := make([]MessageHit, len(rows))
	for i, r := range rows {
		out[i] = MessageHit{SessionID: sessionID, Position: r.Position, Role: r.Role, CreatedAt: r.CreatedAt.Time, Snippet: r.Snippet}
	}
	return out, nil
}
