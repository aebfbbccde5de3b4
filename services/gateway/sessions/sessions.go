package sessions

import (
	"errors"
	"net/http"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

func (h *Handler) getSession(w http.ResponseWriter, r *http.Request, tenant string) {
	s, set, ok := h.readSession(w, r, tenant)
	if !ok {
		return
	}
	state := sessionState(set, s)
	threads, sessions, err := h.store.SessionThreads(r.Context(), tenant, s.SessionID)
	if err != nil {
		h.Internal(w, "reading the session's threads", err)
		return
	}
	state.Agents = agentThreads(threads, sessions)
	httpapi.WriteJSON(w, http.StatusOK, state)
}

// agentThreads describes a session's threads, each with its Mnemos
// session: the live one of each agent is the one written to last.
func agentThreads(threads []store.Thread, sessions []sessionstate.Session) []api.AgentThread {
	live := map[string]int{}
	for i, th := range threads {
		if j, ok := live[th.AgentID]; !ok || th.UpdatedAt.After(threads[j].UpdatedAt) {
			live[th.AgentID] = i
		}
	}
	out := make([]api.AgentThread, 0, len(threads))
	for i, th := range threads {
		a := api.AgentThread{
			AgentID: th.AgentID, Kind: th.Kind, Thread: th.ThreadID, Parent: th.Parent, Messages: th.Length,
			Tokens: sessions[i].TokenCount, State: sessions[i].State, Live: live[th.AgentID] == i, UpdatedAt: th.UpdatedAt,
		}
		if a.State == "" {
			a.State = "ok"
		}
		if th.Parent != "" {
			a.ForkPosition = &th.ForkPosition
		}
		out = append(out, a)
	}
	return out
}

// readSession reads the session of the request's path and its tenant's
// settings; ok false means an answer was written (400, 404 or 500).
func (h *Handler) readSession(w http.ResponseWriter, r *http.Request, tenant string) (sessionstate.Session, tenantcfg.Settings, bool) {
	id, ok := h.PathID(w, r, httpapi.SessionIDs)
	if !ok {
		return sessionstate.Session{}, tenantcfg.Settings{}, false
	}
	s, err := h.store.GetSession(r.Context(), tenant, id)
	if h.SessionFailed(w, r, id, "reading session", err) {
		return sessionstate.Session{}, tenantcfg.Settings{}, false
	}
	set, err := h.settings.For(r.Context(), tenant)
	if err != nil {
		h.Internal(w, "reading tenant settings", err)
		return sessionstate.Session{}, tenantcfg.Settings{}, false
	}
	return s, set, true
}

// patchSession sets a session's switches and answers its state.
func (h *Handler) patchSession(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.PathID(w, r, httpapi.SessionIDs)
	if !ok {
		return
	}
	var p api.SessionPatch
	if err := httpapi.DecodeBody(http.MaxBytesReader(w, r.Body, 4<<10), &p); err != nil {
		httpapi.Fail(w, http.StatusBadRequest, httpapi.BodyErrorCode(err), "session patch: "+err.Error())
		return
	}
	if p.AutoCompactEnabled == nil {
		httpapi.Fail(w, http.StatusBadRequest, "schema_violation", `session patch: name what to change ("auto_compact_enabled": true or false)`)
		return
	}
	err := h.store.InTx(r.Context(), tenant, func(tx *store.Tx) error {
		return tx.SetAutoCompact(r.Context(), id, *p.AutoCompactEnabled)
	})
	if !h.SessionFailed(w, r, id, "setting the session's switches", err) {
		h.getSession(w, r, tenant)
	}
}

func (h *Handler) getPins(w http.ResponseWriter, r *http.Request, tenant string) {
	s, set, ok := h.readSession(w, r, tenant)
	if !ok {
		return
	}
	pins := s.Pins
	if pins == nil {
		pins = []string{}
	}
	httpapi.WriteJSON(w, http.StatusOK, api.Pins{Pins: pins, TenantPinned: set.Compaction.Pinned})
}

func (h *Handler) putPins(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.PathID(w, r, httpapi.SessionIDs)
	if !ok {
		return
	}
	var body api.PinsRequest
	if err := httpapi.DecodeBody(http.MaxBytesReader(w, r.Body, 2*tenantcfg.MaxPins*tenantcfg.MaxPinBytes), &body); err != nil {
		httpapi.Fail(w, http.StatusBadRequest, httpapi.BodyErrorCode(err), "pins: "+err.Error())
		return
	}
	if err := tenantcfg.CheckPins(body.Pins); err != nil {
		httpapi.Fail(w, http.StatusBadRequest, "bad_pins", "pins: "+err.Error())
		return
	}
	err := h.store.InTx(r.Context(), tenant, func(tx *store.Tx) error { return tx.SetPins(r.Context(), id, body.Pins) })
	if !h.SessionFailed(w, r, id, "storing pins", err) {
		h.getPins(w, r, tenant)
	}
}

func (h *Handler) getToolResult(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.PathID(w, r, httpapi.ToolResultIDs)
	if !ok {
		return
	}
	var tr store.ToolResult
	var expired bool
	err := h.store.InTx(r.Context(), tenant, func(tx *store.Tx) error {
		var err error
		tr, err = tx.ToolResult(r.Context(), id)
		if errors.Is(err, store.ErrNotFound) {
			if expired, err = tx.ToolResultOffloaded(r.Context(), id); err == nil {
				err = store.ErrNotFound
			}
		}
		return err
	})
	if errors.Is(err, store.ErrNotFound) && expired {
		httpapi.Fail(w, http.StatusNotFound, "tool_result_expired", "tool result "+id+" has expired: the tenant's retention (retention.tool_results_days) deleted it; the preview in context is what remains")
		return
	}
	if errors.Is(err, store.ErrNotFound) {
		httpapi.Fail(w, http.StatusNotFound, "not_found", "no tool result "+id)
		return
	}
	if err != nil {
		h.Internal(w, "reading tool result", err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, api.ToolResult{ID: tr.ID, SessionID: tr.SessionID, ToolUseID: tr.ToolUseID, SizeChars: tr.SizeChars, Content: tr.Content, CreatedAt: tr.CreatedAt})
}
