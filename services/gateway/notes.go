package gateway

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store"
)

// NotesBody is the answer to GET /v1/sessions/{id}/notes.
type NotesBody struct {
	SessionID string `json:"session_id"`
	// Content is the notes document (markdown).
	Content string `json:"content"`
	Version int64  `json:"version"`
	// LastSummarizedMessage is the uuid of the last message the notes cover.
	LastSummarizedMessage string `json:"last_summarized_message"`
	// TokensAtUpdate and ToolCallsAtUpdate are the session's count and tool
	// calls when the notes were written.
	TokensAtUpdate    int64 `json:"tokens_at_update"`
	ToolCallsAtUpdate int64 `json:"tool_calls_at_update"`
	// UpdateRunning reports an update under way.
	UpdateRunning   bool      `json:"update_running"`
	RejectedUpdates int64     `json:"rejected_updates"`
	FailedUpdates   int64     `json:"failed_updates"`
	LastError       string    `json:"last_error,omitempty"`
	LLMModel        string    `json:"llm_model,omitempty"`
	UpdatedAt       time.Time `json:"updated_at"`
}

// getNotes answers a session's notes, as JSON, or as the markdown document
// alone when the request accepts text/markdown and not JSON.
func (g *Gateway) getNotes(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := g.pathID(w, r, sessionIDs)
	if !ok {
		return
	}
	var n store.Notes
	sessionExists := true
	err := g.store.InTx(r.Context(), tenant, func(tx *store.Tx) error {
		var err error
		n, err = tx.Notes(r.Context(), id)
		if errors.Is(err, store.ErrNotFound) {
			// No notes: tell a session without notes from no session.
			if _, serr := tx.Session(r.Context(), id); errors.Is(serr, store.ErrNotFound) {
				sessionExists = false
			} else if serr != nil {
				return serr
			}
		}
		return err
	})
	if !sessionExists {
		writeError(w, http.StatusNotFound, "not_found", "no session "+id)
		return
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && n.Content == "") {
		writeError(w, http.StatusNotFound, "not_found", "session "+id+" has no notes yet (they are first written when it reaches the tenant's session_memory.init_tokens)")
		return
	}
	if err != nil {
		g.internal(w, "reading notes", err)
		return
	}
	accept := r.Header.Get("Accept")
	if strings.Contains(accept, "text/markdown") && !strings.Contains(accept, "application/json") {
		w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(n.Content)) // the client went away; nothing left to tell it
		return
	}
	writeStableJSON(w, http.StatusOK, NotesBody{
		SessionID: id, Content: n.Content, Version: n.Version, LastSummarizedMessage: n.LastSummarizedUUID,
		TokensAtUpdate: n.TokensAtUpdate, ToolCallsAtUpdate: n.ToolCallsAtUpdate,
		UpdateRunning:   !n.UpdateLeaseUntil.IsZero() && n.UpdateLeaseUntil.After(time.Now()),
		RejectedUpdates: n.RejectedUpdates, FailedUpdates: n.FailedUpdates, LastError: n.LastError,
		LLMModel: n.LLMModel, UpdatedAt: n.UpdatedAt,
	})
}
