package console

import (
	"net/http"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/history"
	"github.com/mnemos-ai/mnemos/pkg/memory/archive"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway/memoryapi"
	"github.com/mnemos-ai/mnemos/services/gateway/sessions"
)

// The downloads of a scope's archive and a session's history live under
// exports/, apart from the pages of memories: a memory may be named
// anything a path segment can hold.

// exportScope downloads the {scope} as GET /v1/scopes/{scope}/export
// answers it, recorded in the audit log with the session's key; a scope
// never written is not found, as on its page.
func (c *Console) exportScope(w http.ResponseWriter, r *http.Request, s signedIn) {
	sc, ok := c.scopeOf(w, r, s)
	if !ok || !c.scopeHolds(w, r, s, sc) {
		return
	}
	ix, docs, err := archive.Export(r.Context(), c.cfg.Memories, s.tenant, sc, s.actor())
	if err != nil {
		c.internal(w, r, s, "exporting the scope", err)
		return
	}
	at := ix.UpdatedAt
	if at.IsZero() {
		at = c.now().UTC().Truncate(time.Second)
	}
	body, err := archive.Bytes(ix.Content, docs, at)
	if err != nil {
		c.internal(w, r, s, "writing the archive", err)
		return
	}
	w.Header().Set("Content-Type", archive.ContentType)
	w.Header().Set("Content-Disposition", `attachment; filename="`+memoryapi.ExportFileName(sc)+`"`)
	_, _ = w.Write(body) //nolint:gosec // a gzip attachment served with nosniff, never rendered as a page; a write error is a browser gone
}

// exportSession downloads the {id} session's history as GET
// /v1/sessions/{id}/export answers it: a page of rows at a time, paced as
// the gateway paces a heavy render.
func (c *Console) exportSession(w http.ResponseWriter, r *http.Request, s signedIn) {
	id := r.PathValue("id")
	if !turn.ValidToken(id) {
		c.fail(w, r, s, http.StatusNotFound, "No such session.")
		return
	}
	ctx := r.Context()
	ex, err := history.Open(ctx, c.cfg.Store, s.tenant, id, cpu.NewPacer(2*time.Millisecond, 10*time.Millisecond))
	if c.sessionFailed(w, r, s, err) {
		return
	}
	w.Header().Set("Content-Type", history.ContentType)
	w.Header().Set("Content-Disposition", `attachment; filename="`+sessions.ExportFileName(id)+`"`)
	if _, err := ex.WriteTo(ctx, w); err != nil && ctx.Err() == nil {
		c.cfg.Log.Error("console: exporting a session failed", "tenant", s.tenant, "session", id, "err", err)
		panic(http.ErrAbortHandler) // the download ends cut short, never as a shorter history
	}
}
