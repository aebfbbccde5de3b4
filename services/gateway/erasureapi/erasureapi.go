// Package erasureapi serves the erasure of a tenant's session or memory
// scope (package erasure): DELETE /v1/sessions/{id} and DELETE
// /v1/scopes/{scope}.
package erasureapi

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/erasure"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// Handler serves the erasure routes.
type Handler struct {
	httpapi.Base
	eraser *erasure.Eraser
}

// New serves erasures done by eraser.
func New(base httpapi.Base, eraser *erasure.Eraser) *Handler {
	return &Handler{Base: base, eraser: eraser}
}

// Register adds the erasure routes to mux.
func (h *Handler) Register(mux httpapi.Mux) {
	mux.Handle("DELETE /v1/sessions/{id}", h.Auth(store.ScopeAdmin, h.deleteSession))
	mux.Handle("DELETE /v1/scopes/{scope}", h.Auth(store.ScopeAdmin, h.deleteScope))
}

func (h *Handler) deleteSession(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.PathID(w, r, httpapi.SessionIDs)
	if !ok {
		return
	}
	er, err := h.eraser.EraseSession(r.Context(), tenant, id, httpapi.Actor(r.Context()))
	h.answer(w, r, er, err, "no session "+id)
}

func (h *Handler) deleteScope(w http.ResponseWriter, r *http.Request, tenant string) {
	scope, err := memory.ParseScope(r.PathValue("scope"))
	if err != nil {
		e, _ := memory.AsError(err)
		h.RefuseRequest(w, r, http.StatusBadRequest, string(memory.ReasonBadScope), e.Detail)
		return
	}
	er, err := h.eraser.EraseScope(r.Context(), tenant, scope, httpapi.Actor(r.Context()))
	h.answer(w, r, er, err, "no scope "+scope.String())
}

// answer writes a finished erasure: 404 when it found nothing to remove
// (what it named never existed, or was erased before), else what went.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, er store.Erasure, err error, missing string) {
	switch {
	case errors.Is(err, erasure.ErrBusy):
		w.Header().Set("Retry-After", "5")
		httpapi.Fail(w, http.StatusServiceUnavailable, "unavailable", "rows kept arriving while the erasure ran; it is recorded and goes on by itself, or ask again")
		return
	case err != nil:
		if r.Context().Err() == nil {
			h.Internal(w, "erasing", err)
		}
		return
	case er.Rows() == 0:
		httpapi.Fail(w, http.StatusNotFound, "not_found", missing)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, Answer(er))
}

// Answer is the API's body of a finished erasure, its tables in order of
// name.
func Answer(er store.Erasure) api.Erasure {
	out := api.Erasure{
		ID: er.ID, Kind: er.Kind, Target: er.Target, Rows: er.Rows(), Tables: []api.ErasedTable{},
		RequestedAt: er.RequestedAt.UTC(), FinishedAt: er.FinishedAt.UTC(),
	}
	for table, rows := range er.Deleted {
		out.Tables = append(out.Tables, api.ErasedTable{Table: table, Rows: rows})
	}
	slices.SortFunc(out.Tables, func(a, b api.ErasedTable) int { return strings.Compare(a.Table, b.Table) })
	return out
}
