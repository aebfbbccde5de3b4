package memoryapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// The headers of a memory write.
const (
	// HeaderSession names the session of the main agent making the write
	// (also ?session=); the write is then the agent's and marks the session.
	HeaderSession = "Mnemos-Session-Id"
	// HeaderReason says why (also ?reason=).
	HeaderReason = "Mnemos-Reason"
	// HeaderSourceTurns lists the event ids the write comes from, comma-separated.
	HeaderSourceTurns = "Mnemos-Source-Turns"
)

const (
	// maxReasonLen bounds a change's reason, in bytes.
	maxReasonLen = 1_000
	// maxSourceTurns bounds the event ids a change names.
	maxSourceTurns = 20
	// maxIndexBody bounds an index edit's body.
	maxIndexBody = 1 << 20
)

func (h *Handler) registerMemories(mux httpapi.Mux) {
	mux.Handle("GET /v1/scopes/{scope}/memories", h.Auth(store.ScopeRead, h.listMemories))
	mux.Handle("GET /v1/scopes/{scope}/memories/{name}", h.Auth(store.ScopeRead, h.getMemory))
	mux.Handle("PUT /v1/scopes/{scope}/memories/{name}", h.Auth(store.ScopeMemoryWrite, h.putMemory))
	mux.Handle("DELETE /v1/scopes/{scope}/memories/{name}", h.Auth(store.ScopeMemoryWrite, h.deleteMemory))
	mux.Handle("GET /v1/scopes/{scope}/memories/{name}/revisions", h.Auth(store.ScopeRead, h.listRevisions))
	mux.Handle("GET /v1/scopes/{scope}/memories/{name}/revisions/{rev}", h.Auth(store.ScopeRead, h.getRevision))
	mux.Handle("POST /v1/scopes/{scope}/memories/{name}/revisions/{rev}/restore", h.Auth(store.ScopeMemoryWrite, h.restoreRevision))
	mux.Handle("GET /v1/scopes/{scope}/memories/{name}/diff", h.Auth(store.ScopeRead, h.diffRevisions))
	mux.Handle("GET /v1/scopes/{scope}/index", h.Auth(store.ScopeRead, h.getIndex))
	mux.Handle("PUT /v1/scopes/{scope}/index", h.Auth(store.ScopeMemoryWrite, h.putIndex))
}

// memoryBody is memory m as the API answers it; whole with its body and
// markdown.
func memoryBody(m memory.Memory, whole bool) api.Memory {
	b := api.Memory{
		Scope: m.Scope.String(), Name: string(m.Name), File: m.Name.File(), Description: m.Description,
		Type: string(m.Type), Revision: m.Revision, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt,
	}
	if whole {
		b.Body, b.Markdown = m.Body, m.Markdown()
	}
	if m.Deleted() {
		at := m.DeletedAt
		b.DeletedAt = &at
	}
	return b
}

// resultBody answers a change of a memory: the memory, and what the
// change did.
func resultBody(res memory.Result) api.Memory {
	b := memoryBody(res.Memory, !res.Memory.Deleted())
	b.Op, b.RestoredFrom = string(res.Op), res.RestoredFrom
	if !res.Changed() {
		b.Op = "unchanged"
	}
	return b
}

// revisionBody is revision r as the API answers it; whole with its
// markdown.
func revisionBody(r memory.Revision, whole bool) api.Revision {
	b := api.Revision{
		Revision: r.Revision, Op: string(r.Op), Actor: string(r.Change.Actor), Reason: r.Change.Reason,
		SourceTurns: r.Change.SourceTurns, SessionID: r.Change.SessionID, RestoredFrom: r.RestoredFrom,
		Deleted: r.Deleted, Description: r.Description, Type: string(r.Type), At: r.At,
	}
	if whole {
		b.Markdown = r.Markdown()
	}
	return b
}

// indexBody is index ix as the API answers it, with what a context loads
// of it under limits l.
func indexBody(ix memory.Index, l memory.Limits) api.Index {
	_, t := memory.TruncateIndex(ix.Content, l.IndexMaxLines, l.IndexMaxBytes)
	return api.Index{
		Scope: ix.Scope.String(), Content: ix.Content, Revision: ix.Revision, Lines: t.TotalLines, Bytes: t.TotalBytes,
		Actor: string(ix.Actor), Reason: ix.Reason, UpdatedAt: ix.UpdatedAt,
		Loaded: api.LoadedIndex{Lines: t.KeptLines, Bytes: t.KeptBytes, Cut: t.Cut(), Warning: t.Warning(l.IndexMaxLines, l.IndexMaxBytes)},
	}
}

// memoryRequest is what every memory route reads first: the scope, the
// name (when the route has one) and who is asking.
type memoryRequest struct {
	tenant string
	scope  memory.Scope
	name   memory.Name
	// revision is the revision the request names, when it names one.
	revision int64
	change   memory.Change
	expect   memory.Expect
}

// readMemoryRequest parses the path, the change headers and the
// precondition, answering 400 (counted) when one is bad.
func (h *Handler) readMemoryRequest(w http.ResponseWriter, r *http.Request, tenant string, withName bool) (memoryRequest, bool) {
	req := memoryRequest{tenant: tenant}
	var err error
	if req.change, err = changeOf(r); err != nil {
		h.refuseMemory(w, r, req.change.Actor, err)
		return req, false
	}
	if req.scope, err = memory.ParseScope(r.PathValue("scope")); err != nil {
		h.refuseMemory(w, r, req.change.Actor, err)
		return req, false
	}
	if withName {
		if req.name, err = memory.ParseRef(r.PathValue("name")); err != nil {
			h.refuseMemory(w, r, req.change.Actor, err)
			return req, false
		}
	}
	if req.expect, err = expectOf(r); err != nil {
		h.refuseMemory(w, r, req.change.Actor, err)
		return req, false
	}
	return req, true
}

// changeOf reads who makes a change: the agent of the session the request
// names, else the API. The headers are bounded (maxReasonLen,
// maxSourceTurns of turn.MaxIDLen) and checked like the ids they name, so a
// change's metadata can never outweigh the change or reach Postgres as
// invalid UTF-8 or NUL.
func changeOf(r *http.Request) (memory.Change, error) {
	ch := memory.Change{Actor: memory.ActorAPI}
	for _, h := range []string{HeaderSession, HeaderReason, HeaderSourceTurns} {
		if n := len(r.Header.Values(h)); n > 1 {
			return ch, memory.Refuse(memory.ReasonBadRequest, "%s is sent %d times; send it once (source turns comma-separated)", h, n)
		}
	}
	q := r.URL.Query()
	session := firstOf(r.Header.Get(HeaderSession), q.Get("session"))
	if session != "" {
		if !turn.ValidToken(session) {
			return ch, memory.Refuse(memory.ReasonBadRequest, "%s: session ids are 1 to %d ASCII letters, digits, '_' and '-', starting with a letter or a digit; got %s",
				HeaderSession, turn.MaxIDLen, httpapi.Describe(session))
		}
		ch.Actor, ch.SessionID = memory.ActorAgent, session
	}
	ch.Reason = firstOf(r.Header.Get(HeaderReason), q.Get("reason"))
	if err := httpapi.CheckText(HeaderReason, ch.Reason, maxReasonLen); err != nil {
		return ch, memory.Refuse(memory.ReasonBadRequest, "%v", err)
	}
	if turns := r.Header.Get(HeaderSourceTurns); turns != "" {
		for _, id := range strings.Split(turns, ",") {
			if id = strings.TrimSpace(id); id == "" {
				continue
			}
			if len(ch.SourceTurns) == maxSourceTurns {
				return ch, memory.Refuse(memory.ReasonBadRequest, "%s names more than %d source turns", HeaderSourceTurns, maxSourceTurns)
			}
			if !turn.ValidID(id) {
				return ch, memory.Refuse(memory.ReasonBadRequest, "%s: %s is not an event id (1 to %d ASCII letters, digits, '_', '-', '.' and ':')",
					HeaderSourceTurns, httpapi.Describe(id), turn.MaxIDLen)
			}
			ch.SourceTurns = append(ch.SourceTurns, id)
		}
	}
	return ch, nil
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// expectOf reads If-Match ("<revision>", the ETag of a read) and
// If-None-Match: * (create only).
func expectOf(r *http.Request) (memory.Expect, error) {
	var e memory.Expect
	if v := r.Header.Get("If-None-Match"); v != "" {
		if strings.TrimSpace(v) != "*" {
			return e, memory.Refuse(memory.ReasonBadRequest, "If-None-Match takes only *")
		}
		e.Absent = true
	}
	if v := r.Header.Get("If-Match"); v != "" {
		rev, err := strconv.ParseInt(strings.Trim(strings.TrimPrefix(strings.TrimSpace(v), "W/"), `"`), 10, 64)
		if err != nil || rev <= 0 {
			return e, memory.Refuse(memory.ReasonBadRequest, "If-Match takes a revision, as the ETag of a read gives it (\"3\")")
		}
		e.Revision = rev
	}
	return e, nil
}

func etag(rev int64) string { return `"` + strconv.FormatInt(rev, 10) + `"` }

// wantsMarkdown reports whether the client asked for the document itself.
func wantsMarkdown(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/markdown") || r.URL.Query().Get("format") == "markdown"
}

func writeMarkdown(w http.ResponseWriter, rev int64, text string) {
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	w.Header().Set("ETag", etag(rev))
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, text) // the client went away; nothing left to tell it
}

// refuseMemory counts and answers a refusal the gateway made itself.
func (h *Handler) refuseMemory(w http.ResponseWriter, r *http.Request, actor memory.Actor, err error) {
	if actor == "" {
		actor = memory.ActorAPI
	}
	h.memoryFailure(w, memoryRequest{}, h.memories.Refused(r.Context(), actor, err))
}

// memoryFailure answers an error of the memory store (which counted its
// refusals): 404, 412, 413, 400 with the refusal's reason, or 500. The 404's
// message says what req named that is missing; the store's error text is
// for the log, not the client.
func (h *Handler) memoryFailure(w http.ResponseWriter, req memoryRequest, err error) {
	if errors.Is(err, memory.ErrNotFound) {
		httpapi.Fail(w, http.StatusNotFound, "not_found", req.notFound(err))
		return
	}
	e, ok := memory.AsError(err)
	if !ok {
		h.Internal(w, "memory request", err)
		return
	}
	status := http.StatusBadRequest
	switch e.Reason {
	case memory.ReasonRevisionMismatch:
		status = http.StatusPreconditionFailed
	case memory.ReasonTooLarge:
		status = http.StatusRequestEntityTooLarge
	}
	httpapi.Fail(w, status, string(e.Reason), e.Detail)
}

// notFound is the public message of a memory store's ErrNotFound for the
// request: a revision it named, a deleted memory, or a memory never written.
func (req memoryRequest) notFound(err error) string {
	switch {
	case req.name == "":
		return "not found"
	case req.revision > 0:
		return fmt.Sprintf("memory %s of scope %s has no revision %d", req.name, req.scope, req.revision)
	case errors.Is(err, memory.ErrDeleted):
		return fmt.Sprintf("memory %s of scope %s is deleted; GET its revisions and POST …/revisions/{rev}/restore to bring it back", req.name, req.scope)
	}
	return fmt.Sprintf("no memory %s in scope %s", req.name, req.scope)
}

func (h *Handler) listMemories(w http.ResponseWriter, r *http.Request, tenant string) {
	req, ok := h.readMemoryRequest(w, r, tenant, false)
	if !ok {
		return
	}
	deleted := r.URL.Query().Get("deleted") == "true"
	list, err := h.memories.List(r.Context(), tenant, req.scope, memory.ListOptions{IncludeDeleted: deleted})
	if err != nil {
		h.memoryFailure(w, req, err)
		return
	}
	out := api.MemoryList{Scope: req.scope.String(), Memories: make([]api.Memory, len(list))}
	for i, m := range list {
		out.Memories[i] = memoryBody(m, false)
	}
	httpapi.WriteStableJSON(w, http.StatusOK, out)
}

func (h *Handler) getMemory(w http.ResponseWriter, r *http.Request, tenant string) {
	req, ok := h.readMemoryRequest(w, r, tenant, true)
	if !ok {
		return
	}
	m, err := h.memories.Get(r.Context(), tenant, req.scope, req.name)
	if err != nil {
		h.memoryFailure(w, req, err)
		return
	}
	if wantsMarkdown(r) {
		writeMarkdown(w, m.Revision, m.Markdown())
		return
	}
	w.Header().Set("ETag", etag(m.Revision))
	httpapi.WriteStableJSON(w, http.StatusOK, memoryBody(m, true))
}

// putMemory creates or replaces a memory from its markdown. The name in the
// path and the frontmatter's must agree.
func (h *Handler) putMemory(w http.ResponseWriter, r *http.Request, tenant string) {
	ctx := r.Context()
	req, ok := h.readMemoryRequest(w, r, tenant, true)
	if !ok {
		return
	}
	limits, err := h.memories.Limits(ctx, tenant)
	if err != nil {
		h.Internal(w, "reading tenant settings", err)
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(limits.MaxBytes)+1))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) || len(raw) > limits.MaxBytes {
		h.refuseMemory(w, r, req.change.Actor, memory.Refuse(memory.ReasonTooLarge, "a memory is at most %d bytes", limits.MaxBytes))
		return
	}
	if err != nil {
		httpapi.Fail(w, http.StatusBadRequest, "bad_request", "reading the body: "+err.Error())
		return
	}
	doc, err := memory.ParseDocument(string(raw))
	if err != nil {
		h.refuseMemory(w, r, req.change.Actor, err)
		return
	}
	if doc.Name != req.name {
		h.refuseMemory(w, r, req.change.Actor, memory.Refuse(memory.ReasonNameMismatch,
			"the path names %s and the frontmatter %s; a memory's name is its file name without .md", req.name, doc.Name))
		return
	}
	res, err := h.memories.Write(ctx, tenant, req.scope, doc, req.change, req.expect)
	if err != nil {
		h.memoryFailure(w, req, err)
		return
	}
	status := http.StatusOK
	if res.Op == memory.OpCreated {
		status = http.StatusCreated
	}
	w.Header().Set("ETag", etag(res.Memory.Revision))
	httpapi.WriteStableJSON(w, status, resultBody(res))
}

func (h *Handler) deleteMemory(w http.ResponseWriter, r *http.Request, tenant string) {
	req, ok := h.readMemoryRequest(w, r, tenant, true)
	if !ok {
		return
	}
	res, err := h.memories.Delete(r.Context(), tenant, req.scope, req.name, req.change, req.expect)
	if err != nil {
		h.memoryFailure(w, req, err)
		return
	}
	httpapi.WriteStableJSON(w, http.StatusOK, resultBody(res))
}

func (h *Handler) listRevisions(w http.ResponseWriter, r *http.Request, tenant string) {
	req, ok := h.readMemoryRequest(w, r, tenant, true)
	if !ok {
		return
	}
	revs, err := h.memories.Revisions(r.Context(), tenant, req.scope, req.name)
	if err != nil {
		h.memoryFailure(w, req, err)
		return
	}
	out := api.RevisionList{Scope: req.scope.String(), Name: string(req.name), Revisions: make([]api.Revision, len(revs))}
	for i, rev := range revs {
		out.Revisions[i] = revisionBody(rev, false)
	}
	httpapi.WriteStableJSON(w, http.StatusOK, out)
}

// revisionParam reads a revision number from the path or the query.
func revisionParam(v, what string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, memory.Refuse(memory.ReasonBadRequest, "%s %q: want a revision number (1, 2, …)", what, v)
	}
	return n, nil
}

func (h *Handler) getRevision(w http.ResponseWriter, r *http.Request, tenant string) {
	req, ok := h.readMemoryRequest(w, r, tenant, true)
	if !ok {
		return
	}
	n, err := revisionParam(r.PathValue("rev"), "revision")
	if err != nil {
		h.refuseMemory(w, r, req.change.Actor, err)
		return
	}
	req.revision = n
	rev, err := h.memories.Revision(r.Context(), tenant, req.scope, req.name, n)
	if err != nil {
		h.memoryFailure(w, req, err)
		return
	}
	if wantsMarkdown(r) {
		writeMarkdown(w, rev.Revision, rev.Markdown())
		return
	}
	httpapi.WriteStableJSON(w, http.StatusOK, revisionBody(rev, true))
}

// restoreRevision rolls a memory back to a revision (a new revision itself).
func (h *Handler) restoreRevision(w http.ResponseWriter, r *http.Request, tenant string) {
	req, ok := h.readMemoryRequest(w, r, tenant, true)
	if !ok {
		return
	}
	n, err := revisionParam(r.PathValue("rev"), "revision")
	if err != nil {
		h.refuseMemory(w, r, req.change.Actor, err)
		return
	}
	req.revision = n
	res, err := h.memories.Rollback(r.Context(), tenant, req.scope, req.name, n, req.change, req.expect)
	if err != nil {
		h.memoryFailure(w, req, err)
		return
	}
	w.Header().Set("ETag", etag(res.Memory.Revision))
	httpapi.WriteStableJSON(w, http.StatusOK, resultBody(res))
}

// diffRevisions diffs ?from= to ?to= (default: the latest revision and the
// one before it).
func (h *Handler) diffRevisions(w http.ResponseWriter, r *http.Request, tenant string) {
	ctx := r.Context()
	req, ok := h.readMemoryRequest(w, r, tenant, true)
	if !ok {
		return
	}
	q := r.URL.Query()
	var from, to int64
	var err error
	if v := q.Get("to"); v != "" {
		if to, err = revisionParam(v, "to"); err != nil {
			h.refuseMemory(w, r, req.change.Actor, err)
			return
		}
	} else {
		m, err := h.memories.GetAny(ctx, tenant, req.scope, req.name)
		if err != nil {
			h.memoryFailure(w, req, err)
			return
		}
		to = m.Revision
	}
	if v := q.Get("from"); v != "" {
		if from, err = revisionParam(v, "from"); err != nil {
			h.refuseMemory(w, r, req.change.Actor, err)
			return
		}
	} else {
		from = max(to-1, 1)
	}
	// Each revision read on its own, so a 404 names the one that is missing.
	var revs [2]memory.Revision
	for i, n := range []int64{from, to} {
		if revs[i], err = h.memories.Revision(ctx, tenant, req.scope, req.name, n); err != nil {
			req.revision = n
			h.memoryFailure(w, req, err)
			return
		}
	}
	httpapi.WriteStableJSON(w, http.StatusOK, api.Diff{Scope: req.scope.String(), Name: string(req.name), From: from, To: to, Diff: memory.DiffRevisions(revs[0], revs[1])})
}

func (h *Handler) getIndex(w http.ResponseWriter, r *http.Request, tenant string) {
	ctx := r.Context()
	req, ok := h.readMemoryRequest(w, r, tenant, false)
	if !ok {
		return
	}
	ix, limits, err := h.indexWithLimits(ctx, tenant, req.scope)
	if err != nil {
		h.memoryFailure(w, req, err)
		return
	}
	if wantsMarkdown(r) {
		writeMarkdown(w, ix.Revision, ix.Content)
		return
	}
	w.Header().Set("ETag", etag(ix.Revision))
	httpapi.WriteStableJSON(w, http.StatusOK, indexBody(ix, limits))
}

func (h *Handler) indexWithLimits(ctx context.Context, tenant string, scope memory.Scope) (memory.Index, memory.Limits, error) {
	limits, err := h.memories.Limits(ctx, tenant)
	if err != nil {
		return memory.Index{}, memory.Limits{}, fmt.Errorf("reading tenant settings: %w", err)
	}
	ix, err := h.memories.Index(ctx, tenant, scope)
	return ix, limits, err
}

// putIndex replaces a scope's index with an edited one (see memory.CheckIndex).
func (h *Handler) putIndex(w http.ResponseWriter, r *http.Request, tenant string) {
	ctx := r.Context()
	req, ok := h.readMemoryRequest(w, r, tenant, false)
	if !ok {
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxIndexBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		h.refuseMemory(w, r, req.change.Actor, memory.Refuse(memory.ReasonTooLarge, "an index edit is at most %d bytes", maxIndexBody))
		return
	}
	if err != nil {
		httpapi.Fail(w, http.StatusBadRequest, "bad_request", "reading the body: "+err.Error())
		return
	}
	res, err := h.memories.PutIndex(ctx, tenant, req.scope, string(raw), req.change, req.expect.Revision)
	if err != nil {
		h.memoryFailure(w, req, err)
		return
	}
	limits, err := h.memories.Limits(ctx, tenant)
	if err != nil {
		h.Internal(w, "reading tenant settings", err)
		return
	}
	out := indexBody(res.Index, limits)
	out.Changed = &res.Changed
	for _, n := range res.Appended {
		out.Appended = append(out.Appended, string(n))
	}
	w.Header().Set("ETag", etag(res.Index.Revision))
	httpapi.WriteStableJSON(w, http.StatusOK, out)
}
