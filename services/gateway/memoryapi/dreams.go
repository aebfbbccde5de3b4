package memoryapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/dream"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

func (h *Handler) registerDreams(mux httpapi.Mux) {
	mux.Handle("POST /v1/scopes/{scope}/dream", h.Auth(store.ScopeMemoryWrite, h.postDream))
	mux.Handle("GET /v1/scopes/{scope}/dreams", h.Auth(store.ScopeRead, h.listDreams))
	mux.Handle("GET /v1/dreams/{id}", h.Auth(store.ScopeRead, h.getDream))
	mux.Handle("POST /v1/dreams/{id}/kill", h.Auth(store.ScopeMemoryWrite, h.killDream))
	mux.Handle("POST /v1/dreams/{id}/approve", h.Auth(store.ScopeMemoryWrite, h.approveDream))
}

// dreamBody is dream d as the API answers it; whole with its proposal.
func dreamBody(d dream.Dream, whole bool) api.Dream {
	b := api.Dream{
		ID: d.ID, Scope: d.Scope.String(), Trigger: d.Trigger, Status: string(d.Status), Holder: d.Holder,
		KillRequested: d.KillRequested, LLMProvider: d.LLMProvider, LLMModel: d.LLMModel,
		Turns: d.Turns, ToolCalls: d.ToolCalls, ToolErrors: d.ToolErrors,
		Written: nonNil(d.Written), Deleted: nonNil(d.Deleted), Summary: d.Summary, Error: d.Error,
		CreatedAt: d.CreatedAt, StartedAt: timeOrNil(d.StartedAt), UpdatingAt: timeOrNil(d.UpdatingAt),
		FinishedAt: timeOrNil(d.FinishedAt), ApprovedAt: timeOrNil(d.ApprovedAt),
	}
	b.Usage.InputTokens, b.Usage.OutputTokens = d.InputTokens, d.OutputTokens
	b.Guard.MemoriesLive, b.Guard.ChangesAllowed, b.Guard.ChangesDestructive = d.MemoriesLive, d.ChangesAllowed, d.ChangesDestructive
	if whole {
		b.Proposal = d.Proposal
	}
	return b
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// dreamFailure answers an error about a dream: 404, 409 with the reason's
// code, or 500.
func (h *Handler) dreamFailure(w http.ResponseWriter, what string, err error) {
	if errors.Is(err, dream.ErrNotFound) {
		httpapi.Fail(w, http.StatusNotFound, "not_found", "no such dream")
		return
	}
	if e, ok := dream.AsError(err); ok {
		httpapi.Fail(w, http.StatusConflict, e.Code, e.Detail)
		return
	}
	h.Internal(w, what, err)
}

// dreamID reads the path's dream id, answering 400 (counted) when it cannot be one.
func (h *Handler) dreamID(w http.ResponseWriter, r *http.Request) (string, bool) {
	return h.PathID(w, r, httpapi.DreamIDs)
}

func (h *Handler) postDream(w http.ResponseWriter, r *http.Request, tenant string) {
	scope, err := memory.ParseScope(r.PathValue("scope"))
	if err != nil {
		h.refuseMemory(w, r, memory.ActorAPI, err)
		return
	}
	set, err := h.settings.For(r.Context(), tenant)
	if err != nil {
		h.Internal(w, "reading tenant settings", err)
		return
	}
	if !set.Dreaming.Enabled {
		httpapi.Fail(w, http.StatusConflict, dream.CodeDisabled, "dreaming is disabled for this tenant (tenant setting dreaming.enabled)")
		return
	}
	d, err := h.dreams.Request(r.Context(), tenant, scope)
	if err != nil {
		h.dreamFailure(w, "requesting a dream", err)
		return
	}
	w.Header().Set("Location", "/v1/dreams/"+d.ID)
	httpapi.WriteJSON(w, http.StatusAccepted, dreamBody(d, true))
}

func (h *Handler) listDreams(w http.ResponseWriter, r *http.Request, tenant string) {
	scope, err := memory.ParseScope(r.PathValue("scope"))
	if err != nil {
		h.refuseMemory(w, r, memory.ActorAPI, err)
		return
	}
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1_000 {
			h.refuseMemory(w, r, memory.ActorAPI, memory.Refuse(memory.ReasonBadRequest, "limit %q: want 1 to 1000", v))
			return
		}
		limit = n
	}
	list, err := h.dreams.List(r.Context(), tenant, scope, limit)
	if err != nil {
		h.dreamFailure(w, "listing dreams", err)
		return
	}
	out := api.DreamList{Scope: scope.String(), Dreams: make([]api.Dream, len(list))}
	for i, d := range list {
		out.Dreams[i] = dreamBody(d, false)
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func (h *Handler) getDream(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.dreamID(w, r)
	if !ok {
		return
	}
	d, err := h.dreams.Get(r.Context(), tenant, id)
	if err != nil {
		h.dreamFailure(w, "reading a dream", err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, dreamBody(d, true))
}

func (h *Handler) killDream(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.dreamID(w, r)
	if !ok {
		return
	}
	d, err := h.dreams.Kill(r.Context(), tenant, id)
	if err != nil {
		h.dreamFailure(w, "killing a dream", err)
		return
	}
	status := http.StatusAccepted // the run stops at its next heartbeat
	if d.Status.Ended() {
		status = http.StatusOK
	}
	httpapi.WriteJSON(w, status, dreamBody(d, false))
}

func (h *Handler) approveDream(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.dreamID(w, r)
	if !ok {
		return
	}
	d, err := h.dreams.Approve(r.Context(), tenant, id)
	if err != nil {
		h.dreamFailure(w, "approving a dream", err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, dreamBody(d, true))
}
