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

// InsertMessages is InsertMessage for many messages in one statement (of
// one session or many), skipping those whose session holds their uuid.
func (t *Tx) InsertMessages(ctx context.Context, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	p := dbsqlc.MessageInsertManyParams{TenantID: t.tenant}
	for _, m := range msgs {
		p.SessionIds = append(p.SessionIds, m.SessionID)
		p.Uuids = append(p.Uuids, m.UUID)
		p.Positions = append(p.Positions, m.Position)
		p.Seqs = append(p.Seqs, m.Seq)
		p.Roles = append(p.Roles, m.Role)
		p.Contents = append(p.Contents, string(m.Content))
		p.ContentHashes = append(p.ContentHashes, m.ContentHash)
		p.Estimates = append(p.Estimates, m.EstimateTokens)
		p.IsResponses = append(p.IsResponses, m.IsResponse)
		p.StopReasons = append(p.StopReasons, m.StopReason)
		p.BytesThrough = append(p.BytesThrough, m.BytesThrough)
	}
	if err := t.q.MessageInsertMany(ctx, p); err != nil {
		return fmt.Errorf("store.InsertMessages: %w", err)
	}
	return nil
}

// MessageHashesOf is MessageHashes for the turns of many sessions at once:
// sessionIDs and uuids are parallel. It returns the hashes by session, then
// by uuid.
func (t *Tx) MessageHashesOf(ctx context.Context, sessionIDs, uuids []string) (map[string]map[string][]byte, error) {
	rows, err := t.q.MessageHashesOfSessions(ctx, dbsqlc.MessageHashesOfSessionsParams{TenantID: t.tenant, SessionIds: sessionIDs, Uuids: uuids})
	if err != nil {
		return nil, fmt.Errorf("store.MessageHashesOf: %w", err)
	}
	out := map[string]map[string][]byte{}
	for _, r := range rows {
		if out[r.SessionID] == nil {
			out[r.SessionID] = map[string][]byte{}
		}
		out[r.SessionID][r.Uuid] = r.ContentHash
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
