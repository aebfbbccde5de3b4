// Package searchapi serves the ranked search of a scope over HTTP:
// GET /v1/scopes/{scope}/search (pkg/search).
package searchapi

import (
	"errors"
	"net/http"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/search"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// Handler serves the search route.
type Handler struct {
	httpapi.Base
	search *search.Searcher
}

// New serves searches with s.
func New(base httpapi.Base, s *search.Searcher) *Handler {
	return &Handler{Base: base, search: s}
}

// Register adds the search route to mux.
func (h *Handler) Register(mux httpapi.Mux) {
	mux.Handle("GET /v1/scopes/{scope}/search", h.Auth(store.ScopeRead, h.searchScope))
}

func (h *Handler) searchScope(w http.ResponseWriter, r *http.Request, tenant string) {
	q := r.URL.Query()
	req := search.Request{Tenant: tenant, Query: q.Get("q"), Source: search.Source(q.Get("source")), Session: q.Get("session"), Caller: search.CallerAPI}
	var err error
	if req.Scope, err = search.ParseScope(r.PathValue("scope")); err == nil {
		req.Limit, err = search.ParseLimit(q.Get("limit"))
	}
	if err != nil {
		h.fail(w, h.search.Refused(r.Context(), search.CallerAPI, err))
		return
	}
	res, err := h.search.Search(r.Context(), req)
	if err != nil {
		h.fail(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, Body(req.Scope.String(), req.Query, res.Hits))
}

// fail answers a refused search 400 with its reason, anything else 500.
func (h *Handler) fail(w http.ResponseWriter, err error) {
	var bad *search.InputError
	if errors.As(err, &bad) {
		httpapi.Fail(w, http.StatusBadRequest, bad.Reason, bad.Detail)
		return
	}
	h.Internal(w, "searching a scope", err)
}

// Body is the API's answer holding hits.
func Body(scope, query string, hits []search.Hit) api.SearchResult {
	out := api.SearchResult{Scope: scope, Query: query, Hits: make([]api.SearchHit, len(hits))}
	for i, h := range hits {
		b := api.SearchHit{Source: string(h.Source), Memory: h.Memory, Session: h.Session, Role: h.Role, Time: h.Time.UTC(), Score: h.Score, Snippet: h.Snippet}
		if h.Source == search.SourceMessage {
			pos := h.Position
			b.Position = &pos
		}
		out.Hits[i] = b
	}
	return out
}
