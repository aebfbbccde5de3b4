package store

import (
	"context"
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

// PutAgentRequest replaces a session's last agent request.
func (t *Tx) PutAgentRequest(ctx context.Context, r AgentRequest) error {
	err := t.q.AgentRequestPut(ctx, dbsqlc.AgentRequestPutParams{
		TenantID: t.tenant, SessionID: r.SessionID, Model: r.Model, Body: r.Body, Reply: r.Reply, Beta: r.Beta,
	})
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
	return AgentRequest{SessionID: sessionID, Model: r.Model, Body: r.Body, Reply: r.Reply, Beta: r.Beta, UpdatedAt: r.UpdatedAt.Time}, nil
}
