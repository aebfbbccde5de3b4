package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// MessageContent is a message as the embedder reads it: its position in
// the session and its content blocks as JSON.
type MessageContent struct {
	Position int64
	Content  []byte
}

// MessageVector is a message's vector as stored: Vector is nil for a
// message without text (marked read, never scored).
type MessageVector struct {
	SessionID string
	Position  int64
	Vector    []byte
}

// MemoryToEmbed is a live memory whose vector is missing or stale.
type MemoryToEmbed struct {
	Name, Description, Body string
	Revision                int64
}

// MemoryVector is a memory's vector as stored, of its revision.
// UpdatedAt is when the memory last changed (as ScopeMemoryVectors reads it).
type MemoryVector struct {
	Name      string
	Revision  int64
	Vector    []byte
	UpdatedAt time.Time
}

// MessageHead is a stored message's role and time.
type MessageHead struct {
	Role      string
	CreatedAt time.Time
}

// MessageVectorResume is the position after the last message of the
// session whose vector of model is stored (0 when none).
func (t *Tx) MessageVectorResume(ctx context.Context, sessionID, model string) (int64, error) {
	p, err := t.q.MessageVectorResume(ctx, dbsqlc.MessageVectorResumeParams{TenantID: t.tenant, SessionID: sessionID, Model: model})
	if err != nil {
		return 0, fmt.Errorf("store.MessageVectorResume: %w", err)
	}
	return p, nil
}

// MessagesToEmbed returns at most limit of the session's messages from
// position from on, in order.
func (t *Tx) MessagesToEmbed(ctx context.Context, sessionID string, from int64, limit int) ([]MessageContent, error) {
	rows, err := t.q.MessagesToEmbed(ctx, dbsqlc.MessagesToEmbedParams{TenantID: t.tenant, SessionID: sessionID, FromPosition: from, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("store.MessagesToEmbed: %w", err)
	}
	out := make([]MessageContent, len(rows))
	for i, r := range rows {
		out[i] = MessageContent{Position: r.Position, Content: r.Content}
	}
	return out, nil
}

// PutMessageVectors stores vectors of one session's messages with model
// (each vs[i].SessionID is sessionID) and returns the positions it wrote:
// a message that has a vector of model keeps it.
func (t *Tx) PutMessageVectors(ctx context.Context, sessionID, model string, vs []MessageVector) ([]int64, error) {
	if len(vs) == 0 {
		return nil, nil
	}
	p := dbsqlc.MessageVectorPutManyParams{TenantID: t.tenant, SessionID: sessionID, Model: model}
	for _, v := range vs {
		p.Positions = append(p.Positions, v.Position)
		p.Vectors = append(p.Vectors, v.Vector)
	}
	wrote, err := t.q.MessageVectorPutMany(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("store.PutMessageVectors: %w", err)
	}
	return wrote, nil
}

// MemoriesToEmbed returns at most limit live memories of scope without a
// vector of model at their revision, least recently changed first.
func (t *Tx) MemoriesToEmbed(ctx context.Context, scope, model string, limit int) ([]MemoryToEmbed, error) {
	rows, err := t.q.MemoriesToEmbed(ctx, dbsqlc.MemoriesToEmbedParams{TenantID: t.tenant, Scope: scope, Model: model, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("store.MemoriesToEmbed: %w", err)
	}
	out := make([]MemoryToEmbed, len(rows))
	for i, r := range rows {
		out[i] = MemoryToEmbed{Name: r.Name, Revision: r.Revision, Description: r.Description, Body: r.Body}
	}
	return out, nil
}

// PutMemoryVectors stores vectors of scope's memories with model and
// returns the names it wrote: a vector of a newer revision is kept.
func (t *Tx) PutMemoryVectors(ctx context.Context, scope, model string, vs []MemoryVector) ([]string, error) {
	if len(vs) == 0 {
		return nil, nil
	}
	p := dbsqlc.MemoryVectorPutManyParams{TenantID: t.tenant, Scope: scope, Model: model}
	for _, v := range vs {
		p.Names = append(p.Names, v.Name)
		p.Revisions = append(p.Revisions, v.Revision)
		p.Vectors = append(p.Vectors, v.Vector)
	}
	wrote, err := t.q.MemoryVectorPutMany(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("store.PutMemoryVectors: %w", err)
	}
	return wrote, nil
}

// VectorSession is a session of a scope with the version of its message
// vectors: it moves whenever one of them is written, replaced or deleted
// (0: the session has none).
type VectorSession struct {
	SessionID string
	Version   int64
}

// ScopeVectorSessions returns the sessions whose memory_scope holds filter
// (session alone when it is not ""), each with its vectors' version.
func (t *Tx) ScopeVectorSessions(ctx context.Context, filter map[string]string, session string) ([]VectorSession, error) {
	raw, err := json.Marshal(filter)
	if err != nil {
		return nil, fmt.Errorf("store.ScopeVectorSessions: %w", err)
	}
	rows, err := t.q.ScopeVectorSessions(ctx, dbsqlc.ScopeVectorSessionsParams{TenantID: t.tenant, ScopeFilter: raw, SessionID: session})
	if err != nil {
		return nil, fmt.Errorf("store.ScopeVectorSessions: %w", err)
	}
	out := make([]VectorSession, len(rows))
	for i, r := range rows {
		out[i] = VectorSession{SessionID: r.SessionID, Version: r.Version}
	}
	return out, nil
}

// SessionMessageVectors returns the vectors of model of the messages of
// sessions, those without text left out.
func (t *Tx) SessionMessageVectors(ctx context.Context, sessions []string, model string) ([]MessageVector, error) {
	rows, err := t.q.SessionMessageVectors(ctx, dbsqlc.SessionMessageVectorsParams{TenantID: t.tenant, SessionIds: sessions, Model: model})
	if err != nil {
		return nil, fmt.Errorf("store.SessionMessageVectors: %w", err)
	}
	out := make([]MessageVector, len(rows))
	for i, r := range rows {
		out[i] = MessageVector{SessionID: r.SessionID, Position: r.Position, Vector: r.Vector}
	}
	return out, nil
}

// ScopeMemoryVectors returns the vectors of model of scope's live memories.
func (t *Tx) ScopeMemoryVectors(ctx context.Context, scope, model string) ([]MemoryVector, error) {
	rows, err := t.q.ScopeMemoryVectors(ctx, dbsqlc.ScopeMemoryVectorsParams{TenantID: t.tenant, Scope: scope, Model: model})
	if err != nil {
		return nil, fmt.Errorf("store.ScopeMemoryVectors: %w", err)
	}
	out := make([]MemoryVector, len(rows))
	for i, r := range rows {
		out[i] = MemoryVector{Name: r.Name, Vector: r.Vector, UpdatedAt: r.UpdatedAt.Time}
	}
	return out, nil
}

// MessageHeads returns the role and time of each of the messages keys
// names that is stored.
func (t *Tx) MessageHeads(ctx context.Context, keys []MessageKey) (map[MessageKey]MessageHead, error) {
	p := dbsqlc.MessageHeadsParams{TenantID: t.tenant}
	for _, k := range keys {
		p.SessionIds = append(p.SessionIds, k.SessionID)
		p.Positions = append(p.Positions, k.Position)
	}
	rows, err := t.q.MessageHeads(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("store.MessageHeads: %w", err)
	}
	out := make(map[MessageKey]MessageHead, len(rows))
	for _, r := range rows {
		out[MessageKey{SessionID: r.SessionID, Position: r.Position}] = MessageHead{Role: r.Role, CreatedAt: r.CreatedAt.Time}
	}
	return out, nil
}
