package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// AgentRequest is the last request the Messages API proxy sent up for a
// session whose answer showed the prompt cache in use: what background
// calls fork (see migrations/00024_agent_requests.sql).
type AgentRequest struct {
	SessionID string
	Model     string
	// Body is the request as sent, byte for byte.
	Body []byte
	// Reply is the answer's content when it called no tool; nil otherwise.
	Reply []byte
	// Beta is the request's anthropic-beta header.
	Beta      string
	UpdatedAt time.Time
}

// AgentRequestPiece is how many bytes of an agent request one stored piece
// holds (migrations/00029_agent_request_pieces.sql): the last may hold
// fewer. A round's request differs from the round before's in its last few
// kilobytes, so it rewrites one or two pieces.
const AgentRequestPiece = 32 << 10

// StoredPieces are the digests of the pieces of a session's stored agent
// request, by index (AgentRequestDigests): what PutAgentRequest need not
// write again.
type StoredPieces [][]byte

// AgentRequestDigests reads the digests of the pieces of a session's stored
// agent request. Read them after the session's lock, so that no other
// round writes between the read and PutAgentRequest.
func (t *Tx) AgentRequestDigests(ctx context.Context, sessionID string) (StoredPieces, error) {
	rows, err := t.q.AgentRequestDigests(ctx, dbsqlc.AgentRequestDigestsParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return nil, fmt.Errorf("store.AgentRequestDigests: %w", err)
	}
	var stored StoredPieces
	for _, r := range rows {
		for int(r.Idx) > len(stored) {
			stored = append(stored, nil) // a gap matches nothing: written again
		}
		stored = append(stored, r.Digest)
	}
	return stored, nil
}

// PutAgentRequest replaces a session's last agent request: of its body's
// pieces it writes those whose digest is not stored's at their index, and
// drops the stored pieces past its last.
func (t *Tx) PutAgentRequest(ctx context.Context, r AgentRequest, stored StoredPieces) error {
	n := (len(r.Body) + AgentRequestPiece - 1) / AgentRequestPiece
	var idxs []int32
	var digests, bodies [][]byte
	for i := range n {
		piece := r.Body[i*AgentRequestPiece : min((i+1)*AgentRequestPiece, len(r.Body))]
		sum := sha256.Sum256(piece)
		if i < len(stored) && bytes.Equal(stored[i], sum[:]) {
			continue
		}
		idxs, digests, bodies = append(idxs, int32(i)), append(digests, sum[:]), append(bodies, piece)
	}
	err := t.q.AgentRequestPut(ctx, dbsqlc.AgentRequestPutParams{
		TenantID: t.tenant, SessionID: r.SessionID, Model: r.Model, Body: []byte{}, Reply: r.Reply, Beta: r.Beta, Pieces: int32(n),
	})
	if err == nil && len(idxs) > 0 {
		err = t.q.AgentRequestPiecesPut(ctx, dbsqlc.AgentRequestPiecesPutParams{
			TenantID: t.tenant, SessionID: r.SessionID, Idxs: idxs, Digests: digests, Bodies: bodies,
		})
	}
	if err == nil && len(stored) > n {
		err = t.q.AgentRequestPiecesTrim(ctx, dbsqlc.AgentRequestPiecesTrimParams{TenantID: t.tenant, SessionID: r.SessionID, Pieces: int32(n)})
	}
	if err != nil {
		return fmt.Errorf("store.PutAgentRequest: %w", err)
	}
	return nil
}

// AgentRequest reads a session's last agent request; ErrNotFound when none.
func (t *Tx) AgentRequest(ctx context.Context, sessionID string) (AgentRequest, error) {
	r, err := t.q.AgentRequestGet(ctx, dbsqlc.AgentRequestGetParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return AgentRequest{}, fmt.Errorf("store.AgentRequest: %w", notFound(err))
	}
	if r.PiecesFound != r.Pieces {
		return AgentRequest{}, fmt.Errorf("store.AgentRequest: session %s: %d of its request's %d pieces are stored", sessionID, r.PiecesFound, r.Pieces)
	}
	return AgentRequest{SessionID: sessionID, Model: r.Model, Body: r.Body, Reply: r.Reply, Beta: r.Beta, UpdatedAt: r.UpdatedAt.Time}, nil
}
