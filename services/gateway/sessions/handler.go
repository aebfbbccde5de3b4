// Package sessions serves what the API tells of a tenant's sessions: lists
// and scopes, a session's state, switches and pins, its usage, offloaded
// tool results, session notes and the export of its history.
package sessions

import (
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// Config of the session routes.
type Config struct {
	// Now is the clock usage reads (time.Now when nil).
	Now func() time.Time
	// An export is paced (cpu.Pacer): it rests HeavyRest after each
	// HeavyWork of reading and encoding; HeavyRest 0 paces nothing.
	HeavyWork, HeavyRest time.Duration
}

// Handler serves the session routes.
type Handler struct {
	httpapi.Base
	cfg       Config
	store     *store.Store
	settings  *tenantcfg.Cache
	admission *httpapi.Admission
	now       func() time.Time
}

// New serves st's sessions; an export is admitted as expensive by admission.
func New(cfg Config, base httpapi.Base, admission *httpapi.Admission, st *store.Store, settings *tenantcfg.Cache) *Handler {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Handler{Base: base, cfg: cfg, store: st, settings: settings, admission: admission, now: now}
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
	mux.Handle("GET /v1/sessions/{id}/usage", h.Auth(store.ScopeRead, h.getSessionUsage))
	mux.Handle("GET /v1/sessions/{id}/export", h.Auth(store.ScopeRead, h.admission.Expensive(httpapi.Mnemos, h.exportSession)))
}
