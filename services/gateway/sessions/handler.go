// Package sessions serves what the API tells of a tenant's sessions: lists
// and scopes, a session's state, switches and pins, its usage, offloaded
// tool results and session notes.
package sessions

import (
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// Handler serves the session routes.
type Handler struct {
	httpapi.Base
	store    *store.Store
	settings *tenantcfg.Cache
	now      func() time.Time
}

// New serves st's sessions; now is the clock usage reads (time.Now when nil).
func New(base httpapi.Base, st *store.Store, settings *tenantcfg.Cache, now func() time.Time) *Handler {
	if now == nil {
		now = time.Now
	}
	return &Handler{Base: base, store: st, settings: settings, now: now}
}

// Register adds the session routes to mux.
func (h *Handler) Register(mux httpapi.Mux) {
	mux.Handle("GET /v1/sessions", h.Auth(store.ScopeRead, h.listSessions))
	mux.Handle("GET /v1/scopes", h.Auth(store.ScopeRead, h.listScopes))
	mux.Handle("GET /v1/usage", h.Auth(store.ScopeRead, h.getUsage))
	mux.Handle("GET /v1/sessions/{id}", h.Auth(store.ScopeRead, h.getSession))
	mux.Handle("PATCH /v1/sessions/{id}", h.Auth(store.ScopeIngest, h.patchSession))
	mux.Handle("GET /v1/sessions/{id}/pins", h.Auth(store.ScopeRead, h.getPins))
	mux.Handle("PUT /v1/sessions/{id}/pins", h.Auth(store.ScopeIngest, h.putPins))
	mux.Handle("GET /v1/tool-results/{id}", h.Auth(store.ScopeRead, h.getToolResult))
	mux.Handle("GET /v1/sessions/{id}/notes", h.Auth(store.ScopeRead, h.getNotes))
}
