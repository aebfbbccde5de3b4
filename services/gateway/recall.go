package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

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

// RecallRequest asks which memories bear on what a session's user asked.
type RecallRequest struct {
	// Query is what the user asked.
	Query string `json:"query"`
	// RecentTools are the tools the agent has just used: reference memories
	// for them are not picked, their pitfalls are.
	RecentTools []string `json:"recent_tools,omitempty"`
	// MemoryScope names the scopes to recall from (the turn event's
	// memory_scope); by default the session's.
	MemoryScope map[string]string `json:"memory_scope,omitempty"`
}

// RecalledMemory is a memory recall surfaced.
type RecalledMemory struct {
	Scope       string    `json:"scope"`
	Name        string    `json:"name"`
	Type        string    `json:"type"`
	Description string    `json:"description"`
	Revision    int64     `json:"revision"`
	UpdatedAt   time.Time `json:"updated_at"`
	// Age is "today", "yesterday" or "N days ago"; Stale says that it is
	// old enough to carry the note to verify it.
	Age       string `json:"age"`
	AgeDays   int    `json:"age_days"`
	Stale     bool   `json:"stale"`
	Truncated bool   `json:"truncated"`
	// Text is the reminder to show the agent (a <system-reminder> block).
	Text string `json:"text"`
}

// RecallBody is the answer to POST /v1/sessions/{id}/recall.
type RecallBody struct {
	SessionID string           `json:"session_id"`
	Outcome   string           `json:"outcome"`
	Memories  []RecalledMemory `json:"memories"`
	// Candidates is how many memories the selector chose from.
	Candidates int `json:"candidates"`
	// Dropped counts the picks not surfaced by reason; Invented lists the
	// names the selector made up.
	Dropped  map[string]int `json:"dropped"`
	Invented []string       `json:"invented"`
	// SessionBytes is what recall surfaced in the session since its latest
	// compaction; SessionLimit is where it stops.
	SessionBytes int64  `json:"session_bytes"`
	SessionLimit int64  `json:"session_limit"`
	LLMProvider  string `json:"llm_provider"`
}

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
	var req RecallRequest
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
	out := RecallBody{
		SessionID: id, Outcome: string(res.Outcome), Memories: []RecalledMemory{}, Candidates: res.Candidates,
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
		out.Memories = append(out.Memories, RecalledMemory{
			Scope: m.Scope.String(), Name: string(m.Name), Type: string(m.Type), Description: m.Description,
			Revision: m.Revision, UpdatedAt: m.UpdatedAt, Age: recall.AgeText(m.AgeDays), AgeDays: m.AgeDays,
			Stale: m.Stale, Truncated: m.Truncated, Text: m.Text,
		})
	}
	writeStableJSON(w, http.StatusOK, out)
}

// checkRecall returns what is wrong with a recall request, or "".
func checkRecall(req RecallRequest) string {
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
