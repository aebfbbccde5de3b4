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
	CreatedAt      time.Time
}

// MessageHash returns the content hash of a stored message, or ErrNotFound.
func (t *Tx) MessageHash(ctx context.Context, sessionID, uuid string) ([]byte, error) {
	h, err := t.q.MessageGetHash(ctx, dbsqlc.MessageGetHashParams{TenantID: t.tenant, SessionID: sessionID, Uuid: uuid})
	if err != nil {
		return nil, notFound(err)
	}
	return h, nil
}

// InsertMessage stores a message at its position.
func (t *Tx) InsertMessage(ctx context.Context, m Message) error {
	err := t.q.MessageInsert(ctx, dbsqlc.MessageInsertParams{
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
	})
	if err != nil {
		return fmt.Errorf("store.InsertMessage %s: %w", m.UUID, err)
	}
	return nil
}

// Messages lists a session's messages in order.
func (t *Tx) Messages(ctx context.Context, sessionID string) ([]Message, error) {
	rows, err := t.q.MessageListBySession(ctx, dbsqlc.MessageListBySessionParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return nil, fmt.Errorf("store.Messages: %w", err)
	}
	out := make([]Message, 0, len(rows))
	for _, r := range rows {
		out = append(out, Message{
			SessionID: r.SessionID, UUID: r.Uuid, Position: r.Position, Seq: r.Seq, Role: r.Role,
			Content: r.Content, ContentHash: r.ContentHash, EstimateTokens: r.EstimateTokens,
			IsResponse: r.IsResponse, StopReason: r.StopReason, CreatedAt: r.CreatedAt.Time,
		})
	}
	return out, nil
}
