package contextapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// Bounds of a recall request.
const (
	maxRecallBody = 64 << 10
)

func (h *Handler) postRecall(w http.ResponseWriter, r *http.Request, tenant string) {
	ctx := r.Context()
	if h.recall == nil {
		httpapi.Fail(w, http.StatusServiceUnavailable, "recall_unavailable", "this process serves no recall")
		return
	}
	refuse := func(status int, code, msg string) {
		h.recall.Refused(ctx, recall.SourceAPI)
		httpapi.Fail(w, status, code, msg)
	}
	id, ok := h.PathID(w, r, httpapi.SessionIDs)
	if !ok {
		h.recall.Refused(ctx, recall.SourceAPI)
		return
	}
	var req api.RecallRequest
	if err := httpapi.DecodeBody(http.MaxBytesReader(w, r.Body, maxRecallBody), &req); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			refuse(http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("a recall request is at most %d bytes", maxRecallBody))
			return
		}
		refuse(http.StatusBadRequest, httpapi.BodyErrorCode(err), "recall body: "+err.Error())
		return
	}
	if msg := recall.CheckRequest(req.Query, req.RecentTools, req.MemoryScope); msg != "" {
		code := "bad_request"
		if strings.HasPrefix(msg, "memory_scope") {
			code = string(memory.ReasonBadScope)
		}
		refuse(http.StatusBadRequest, code, msg)
		return
	}
	scope := req.MemoryScope
	if scope == nil {
		s, err := h.store.GetSession(ctx, tenant, id)
		if errors.Is(err, store.ErrNotFound) {
			refuse(http.StatusNotFound, "not_found", "no session "+id+"; name its memory_scope to recall before its first turn")
			return
		}
		if err != nil {
			h.Internal(w, "reading session", err)
			return
		}
		scope = s.MemoryScope
	}
	set, err := h.settings.For(ctx, tenant)
	if err != nil {
		h.Internal(w, "reading tenant settings", err)
		return
	}
	res, err := h.recall.Recall(ctx, recall.Query{
		Tenant: tenant, SessionID: id, MemoryScope: scope, Text: req.Query, RecentTools: req.RecentTools, Source: recall.SourceAPI,
	})
	switch {
	case err != nil && res.Outcome == recall.OutcomeFailed:
		h.Log.Warn("recall selector failed", "tenant", tenant, "session", id, "err", err)
		httpapi.Fail(w, http.StatusBadGateway, "recall_failed", "the memory selector failed: "+err.Error())
		return
	case err != nil:
		h.Internal(w, "recall", err)
		return
	}
	out := api.Recall{
		SessionID: id, Outcome: string(res.Outcome), Memories: []api.RecalledMemory{}, Candidates: res.Candidates,
		Dropped: map[string]int{}, Invented: res.Invented, SessionBytes: res.SessionBytes, SessionLimit: set.Recall.SessionBytes,
		LLMProvider: h.recall.Provider(),
	}
	if out.Invented == nil {
		out.Invented = []string{}
	}
	for reason, n := range res.Dropped {
		out.Dropped[string(reason)] = n
	}
	for _, m := range res.Memories {
		out.Memories = append(out.Memories, api.RecalledMemory{
			Scope: m.Scope.String(), Name: string(m.Name), Type: string(m.Type), Description: m.Description,
			Revision: m.Revision, UpdatedAt: m.UpdatedAt, Age: recall.AgeText(m.AgeDays), AgeDays: m.AgeDays,
			Stale: m.Stale, Truncated: m.Truncated, Text: m.Text,
		})
	}
	httpapi.WriteStableJSON(w, http.StatusOK, out)
}
