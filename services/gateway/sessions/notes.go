package sessions

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// getNotes answers a session's notes, as JSON, or as the markdown document
// alone when the request accepts text/markdown and not JSON.
func (h *Handler) getNotes(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.PathID(w, r, httpapi.SessionIDs)
	if !ok {
		return
	}
	var n store.Notes
	sessionExists := true
	err := h.store.InTx(r.Context(), tenant, func(tx *store.Tx) error {
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
		httpapi.Fail(w, http.StatusNotFound, "not_found", "no session "+id)
		return
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && n.Content == "") {
		httpapi.Fail(w, http.StatusNotFound, "not_found", "session "+id+" has no notes yet (they are first written when it reaches the tenant's session_memory.init_tokens)")
		return
	}
	if err != nil {
		h.Internal(w, "reading notes", err)
		return
	}
	accept := r.Header.Get("Accept")
	if strings.Contains(accept, "text/markdown") && !strings.Contains(accept, "application/json") {
		w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(n.Content)) // the client went away; nothing left to tell it
		return
	}
	httpapi.WriteStableJSON(w, http.StatusOK, api.Notes{
		SessionID: id, Content: n.Content, Version: n.Version, LastSummarizedMessage: n.LastSummarizedUUID,
		TokensAtUpdate: n.TokensAtUpdate, ToolCallsAtUpdate: n.ToolCallsAtUpdate,
		UpdateRunning:   !n.UpdateLeaseUntil.IsZero() && n.UpdateLeaseUntil.After(time.Now()),
		RejectedUpdates: n.RejectedUpdates, FailedUpdates: n.FailedUpdates, LastError: n.LastError,
		LLMModel: n.LLMModel, UpdatedAt: n.UpdatedAt,
	})
}
