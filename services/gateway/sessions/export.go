package sessions

import (
	"net/http"

	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/history"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// exportSession answers the session's history as turn events, one JSON
// line each in seq order (package history), read and written a page at a
// time and paced, so a session of any size is never held whole. 404 for a
// session the tenant does not have.
func (h *Handler) exportSession(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.PathID(w, r, httpapi.SessionIDs)
	if !ok {
		return
	}
	ctx := r.Context()
	ex, err := history.Open(ctx, h.store, tenant, id, cpu.NewPacer(h.cfg.HeavyWork, h.cfg.HeavyRest))
	if h.SessionFailed(w, r, id, "reading the session", err) {
		return
	}
	w.Header().Set("Content-Type", history.ContentType)
	w.Header().Set("Content-Disposition", `attachment; filename="`+ExportFileName(id)+`"`)
	w.WriteHeader(http.StatusOK)
	if _, err := ex.WriteTo(ctx, w); err != nil && ctx.Err() == nil {
		// The status is sent: the connection is cut before the answer's
		// end, which a client sees as a body cut short (an unexpected
		// EOF), never as a shorter history.
		h.Log.Error("exporting a session failed", "tenant", tenant, "session", id, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// ExportFileName is the file name a session's export is offered under.
func ExportFileName(session string) string { return "session-" + session + ".jsonl" }
