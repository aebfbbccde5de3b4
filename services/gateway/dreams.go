package gateway

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/dream"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

func (g *Gateway) registerDreams(mux httpapi.Mux) {
	mux.Handle("POST /v1/scopes/{scope}/dream", g.auth(g.postDream))
	mux.Handle("GET /v1/scopes/{scope}/dreams", g.auth(g.listDreams))
	mux.Handle("GET /v1/dreams/{id}", g.auth(g.getDream))
	mux.Handle("POST /v1/dreams/{id}/kill", g.auth(g.killDream))
	mux.Handle("POST /v1/dreams/{id}/approve", g.auth(g.approveDream))
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
func (g *Gateway) dreamFailure(w http.ResponseWriter, what string, err error) {
	if errors.Is(err, dream.ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", "no such dream")
		return
	}
	if e, ok := dream.AsError(err); ok {
		writeError(w, http.StatusConflict, e.Code, e.Detail)
		return
	}
	g.internal(w, what, err)
}

// dreamID reads the path's dream id, answering 400 (counted) when it cannot be one.
func (g *Gateway) dreamID(w http.ResponseWriter, r *http.Request) (string, bool) {
	return g.pathID(w, r, dreamIDs)
}

func (g *Gateway) postDream(w http.ResponseWriter, r *http.Request, tenant string) {
	scope, err := memory.ParseScope(r.PathValue("scope"))
	if err != nil {
		g.refuseMemory(w, r, memory.ActorAPI, err)
		return
	}
	set, err := g.settings.For(r.Context(), tenant)
	if err != nil {
		g.internal(w, "reading tenant settings", err)
		return
	}
	if !set.Dreaming.Enabled {
		writeError(w, http.StatusConflict, dream.CodeDisabled, "dreaming is disabled for this tenant (tenant setting dreaming.enabled)")
		return
	}
	d, err := g.dreams.Request(r.Context(), tenant, scope)
	if err != nil {
		g.dreamFailure(w, "requesting a dream", err)
		return
	}
	w.Header().Set("Location", "/v1/dreams/"+d.ID)
	writeJSON(w, http.StatusAccepted, dreamBody(d, true))
}

func (g *Gateway) listDreams(w http.ResponseWriter, r *http.Request, tenant string) {
	scope, err := memory.ParseScope(r.PathValue("scope"))
	if err != nil {
		g.refuseMemory(w, r, memory.ActorAPI, err)
		return
	}
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1_000 {
			g.refuseMemory(w, r, memory.ActorAPI, memory.Refuse(memory.ReasonBadRequest, "limit %q: want 1 to 1000", v))
			return
		}
		limit = n
	}
	list, err := g.dreams.List(r.Context(), tenant, scope, limit)
	if err != nil {
		g.dreamFailure(w, "listing dreams", err)
		return
	}
	out := api.DreamList{Scope: scope.String(), Dreams: make([]api.Dream, len(list))}
	for i, d := range list {
		out.Dreams[i] = dreamBody(d, false)
	}
	writeJSON(w, http.StatusOK, out)
}

func (g *Gateway) getDream(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := g.dreamID(w, r)
	if !ok {
		return
	}
	d, err := g.dreams.Get(r.Context(), tenant, id)
	if err != nil {
		g.dreamFailure(w, "reading a dream", err)
		return
	}
	writeJSON(w, http.StatusOK, dreamBody(d, true))
}

func (g *Gateway) killDream(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := g.dreamID(w, r)
	if !ok {
		return
	}
	d, err := g.dreams.Kill(r.Context(), tenant, id)
	if err != nil {
		g.dreamFailure(w, "killing a dream", err)
		return
	}
	status := http.StatusAccepted // the run stops at its next heartbeat
	if d.Status.Ended() {
		status = http.StatusOK
	}
	writeJSON(w, status, dreamBody(d, false))
}

func (g *Gateway) approveDream(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := g.dreamID(w, r)
	if !ok {
		return
	}
	d, err := g.dreams.Approve(r.Context(), tenant, id)
	if err != nil {
		g.dreamFailure(w, "approving a dream", err)
		return
	}
	writeJSON(w, http.StatusOK, dreamBody(d, true))
}
