package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// Bounds of a recall request.
const (
	maxRecallBody  = 64 << 10
	maxRecentTools = 64
	maxToolName    = 128
)

// UseRecall serves POST /v1/sessions/{id}/recall with r. Without it the
// route answers 503: the process has no selector.
func (g *Gateway) UseRecall(r *recall.Recaller) { g.recall = r }

func (g *Gateway) postRecall(w http.ResponseWriter, r *http.Request, tenant string) {
	ctx := r.Context()
	if g.recall == nil {
		writeError(w, http.StatusServiceUnavailable, "recall_unavailable", "this process serves no recall")
		return
	}
	refuse := func(status int, code, msg string) {
		g.recall.Refused(ctx, recall.SourceAPI)
		writeError(w, status, code, msg)
	}
	id, ok := g.pathID(w, r, sessionIDs)
	if !ok {
		g.recall.Refused(ctx, recall.SourceAPI)
		return
	}
	var req api.RecallRequest
	if err := decodeBody(http.MaxBytesReader(w, r.Body, maxRecallBody), &req); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			refuse(http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("a recall request is at most %d bytes", maxRecallBody))
			return
		}
		refuse(http.StatusBadRequest, bodyErrorCode(err), "recall body: "+err.Error())
		return
	}
	if msg := checkRecall(req); msg != "" {
		code := "bad_request"
		if strings.HasPrefix(msg, "memory_scope") {
			code = string(memory.ReasonBadScope)
		}
		refuse(http.StatusBadRequest, code, msg)
		return
	}
	scope := req.MemoryScope
	if scope == nil {
		s, err := g.store.GetSession(ctx, tenant, id)
		if errors.Is(err, store.ErrNotFound) {
			refuse(http.StatusNotFound, "not_found", "no session "+id+"; name its memory_scope to recall before its first turn")
			return
		}
		if err != nil {
			g.internal(w, "reading session", err)
			return
		}
		scope = s.MemoryScope
	}
	set, err := g.settings.For(ctx, tenant)
	if err != nil {
		g.internal(w, "reading tenant settings", err)
		return
	}
	res, err := g.recall.Recall(ctx, recall.Query{
		Tenant: tenant, SessionID: id, MemoryScope: scope, Text: req.Query, RecentTools: req.RecentTools, Source: recall.SourceAPI,
	})
	switch {
	case err != nil && res.Outcome == recall.OutcomeFailed:
		g.log.Warn("recall selector failed", "tenant", tenant, "session", id, "err", err)
		writeError(w, http.StatusBadGateway, "recall_failed", "the memory selector failed: "+err.Error())
		return
	case err != nil:
		g.internal(w, "recall", err)
		return
	}
	out := api.Recall{
		SessionID: id, Outcome: string(res.Outcome), Memories: []api.RecalledMemory{}, Candidates: res.Candidates,
		Dropped: map[string]int{}, Invented: res.Invented, SessionBytes: res.SessionBytes, SessionLimit: set.Recall.SessionBytes,
		LLMProvider: g.recall.Provider(),
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
	writeStableJSON(w, http.StatusOK, out)
}

// checkRecall returns what is wrong with a recall request, or "".
func checkRecall(req api.RecallRequest) string {
	if strings.TrimSpace(req.Query) == "" {
		return "query is empty: send what the user asked"
	}
	if len(req.RecentTools) > maxRecentTools {
		return fmt.Sprintf("recent_tools lists %d tools, more than %d", len(req.RecentTools), maxRecentTools)
	}
	for _, t := range req.RecentTools {
		if strings.TrimSpace(t) == "" || len(t) > maxToolName || strings.ContainsAny(t, ",\n") {
			return fmt.Sprintf("recent_tools: %.40q is not a tool name (1 to %d bytes, no comma or newline)", t, maxToolName)
		}
	}
	for kind, scopeID := range req.MemoryScope {
		if _, err := memory.NewScope(memory.Kind(kind), scopeID); err != nil {
			return "memory_scope: " + err.Error()
		}
	}
	return ""
}
