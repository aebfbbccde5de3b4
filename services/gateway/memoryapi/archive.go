package memoryapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/archive"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// registerArchive adds a scope's export and import, each expensive: it
// holds a whole archive, up to 64 MiB, and writes or reads every memory.
func (h *Handler) registerArchive(mux httpapi.Mux) {
	expensive := func(scope string, next httpapi.Handler) http.Handler {
		return h.Auth(scope, h.admission.Expensive(httpapi.Mnemos, next))
	}
	mux.Handle("GET /v1/scopes/{scope}/export", expensive(store.ScopeRead, h.exportScope))
	mux.Handle("POST /v1/scopes/{scope}/import", expensive(store.ScopeMemoryWrite, h.importScope))
}

// exportScope answers the scope's index and live memories as a gzipped tar
// of memory/ (see package archive). A scope without memories answers an
// archive of its index alone (empty when never written).
func (h *Handler) exportScope(w http.ResponseWriter, r *http.Request, tenant string) {
	ctx := r.Context()
	scope, err := memory.ParseScope(r.PathValue("scope"))
	if err != nil {
		h.refuseMemory(w, r, memory.ActorAPI, err)
		return
	}
	ix, docs, err := archive.Export(ctx, h.memories, tenant, scope, httpapi.Actor(ctx))
	if err != nil {
		h.memoryFailure(w, memoryRequest{scope: scope}, err)
		return
	}
	body, err := archive.Bytes(ix.Content, docs, exportTime(ix, time.Now()))
	if err != nil {
		h.Internal(w, "writing an archive", err)
		return
	}
	w.Header().Set("Content-Type", archive.ContentType)
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, ExportFileName(scope)))
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, bytes.NewReader(body)) // the client went away; nothing left to tell it
}

// ExportFileName is the file name an export of scope is offered under:
// "memory-user-u-42.tar.gz".
func ExportFileName(scope memory.Scope) string {
	return "memory-" + string(scope.Kind) + "-" + scope.ID + ".tar.gz"
}

// exportTime is the time an archive's entries carry: the index's last
// change, or now for a scope never written.
func exportTime(ix memory.Index, now time.Time) time.Time {
	if ix.UpdatedAt.IsZero() {
		return now.UTC().Truncate(time.Second)
	}
	return ix.UpdatedAt
}

// importScope writes an archive's memories into the scope, all or none
// (see memory.Store.Import), as the actor import.
func (h *Handler) importScope(w http.ResponseWriter, r *http.Request, tenant string) {
	ctx := r.Context()
	scope, err := memory.ParseScope(r.PathValue("scope"))
	if err != nil {
		h.refuseMemory(w, r, memory.ActorImport, err)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, archive.ContentType) &&
		!strings.HasPrefix(ct, "application/x-gzip") && !strings.HasPrefix(ct, "application/octet-stream") {
		h.refuseMemory(w, r, memory.ActorImport, memory.Refuse(archive.ReasonBadArchive, "Content-Type %q: send the archive as application/gzip", httpapi.Describe(ct)))
		return
	}
	l, err := h.memories.Limits(ctx, tenant)
	if err != nil {
		h.Internal(w, "reading tenant settings", err)
		return
	}
	limits := archive.LimitsFor(l)
	var buf bytes.Buffer
	_, err = buf.ReadFrom(http.MaxBytesReader(w, r.Body, limits.MaxTotalBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		h.refuseMemory(w, r, memory.ActorImport, memory.Refuse(memory.ReasonTooLarge, "an archive is at most %d bytes", limits.MaxTotalBytes))
		return
	}
	if err != nil {
		httpapi.Fail(w, http.StatusBadRequest, "bad_request", "reading the body: "+err.Error())
		return
	}
	a, err := archive.Read(&buf, limits)
	if err != nil {
		h.refuseMemory(w, r, memory.ActorImport, err)
		return
	}
	res, err := archive.Import(ctx, h.memories, tenant, scope, a, httpapi.Actor(ctx))
	if err != nil {
		h.memoryFailure(w, memoryRequest{scope: scope}, err)
		return
	}
	httpapi.WriteStableJSON(w, http.StatusOK, ImportBody(scope, res, l))
}

// ImportBody is what an import answers.
func ImportBody(scope memory.Scope, res memory.ImportResult, l memory.Limits) api.ScopeImport {
	names := func(ns []memory.Name) []string {
		out := make([]string, len(ns))
		for i, n := range ns {
			out[i] = string(n)
		}
		return out
	}
	return api.ScopeImport{
		Scope: scope.String(), Created: names(res.Created), Updated: names(res.Updated), Unchanged: names(res.Unchanged),
		IndexFrom: res.IndexFrom, IndexProblem: res.IndexProblem, Index: indexBody(res.Index, l),
	}
}
