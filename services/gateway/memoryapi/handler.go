// Package memoryapi serves a scope's long-term memories over HTTP: the
// memories, their revisions and index, and the dreams that consolidate
// them.
package memoryapi

import (
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/dream"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// Handler serves the memory routes.
type Handler struct {
	httpapi.Base
	admission *httpapi.Admission
	memories  *memory.Store
	dreams    *dream.Dreams
	settings  *tenantcfg.Cache
}

// New serves memories and dreams; settings tells whether a tenant dreams.
// A scope's export and import are admitted as expensive by admission.
func New(base httpapi.Base, admission *httpapi.Admission, memories *memory.Store, dreams *dream.Dreams, settings *tenantcfg.Cache) *Handler {
	return &Handler{Base: base, admission: admission, memories: memories, dreams: dreams, settings: settings}
}

// Register adds the memory and dream routes to mux.
func (h *Handler) Register(mux httpapi.Mux) {
	h.registerMemories(mux)
	h.registerDreams(mux)
	h.registerArchive(mux)
}
