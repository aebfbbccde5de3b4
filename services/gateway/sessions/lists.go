package sessions

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// The pages of a listing: ?limit= items (DefaultListLimit when absent, at
// most MaxListLimit), then ?cursor= the answer's next_cursor for the next.
const (
	DefaultListLimit = 50
	MaxListLimit     = 500
	// maxPrefixLen bounds a scope prefix: a kind, ':' and the longest id.
	maxPrefixLen = len("project:") + memory.MaxScopeIDLen
)

// listRequest is what every listing reads from its query first.
type listRequest struct {
	q      url.Values
	limit  int
	cursor string // decoded; "" for the first page
}

// readList checks the query of a listing: only the parameters it takes
// (limit, cursor and filters), each once unless repeatable, a limit of 1
// to MaxListLimit, a cursor this listing gave (kind is its tag). It
// answers 400 (counted) and reports false when one is bad.
func (h *Handler) readList(w http.ResponseWriter, r *http.Request, kind string, filters, repeatable []string) (listRequest, bool) {
	q := r.URL.Query()
	req := listRequest{q: q, limit: DefaultListLimit}
	refuse := func(code, format string, args ...any) (listRequest, bool) {
		h.RefuseRequest(w, r, http.StatusBadRequest, code, fmt.Sprintf(format, args...))
		return req, false
	}
	known := append([]string{"limit", "cursor"}, filters...)
	for name, vs := range q {
		if !slices.Contains(known, name) {
			return refuse("bad_filter", "unknown parameter %s: this listing takes %s", httpapi.Describe(name), strings.Join(known, ", "))
		}
		if len(vs) > 1 && !slices.Contains(repeatable, name) {
			return refuse("bad_filter", "%s is given %d times; give it once", name, len(vs))
		}
		for _, v := range vs {
			if err := httpapi.CheckText(name, v, 1024); err != nil {
				return refuse("bad_filter", "%v", err)
			}
		}
	}
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > MaxListLimit {
			return refuse("bad_limit", "limit %s: want a whole number from 1 to %d (default %d)", httpapi.Describe(v[0]), MaxListLimit, DefaultListLimit)
		}
		req.limit = n
	}
	if v, ok := q["cursor"]; ok && v[0] != "" { // an empty cursor is none: the first page
		raw, err := base64.RawURLEncoding.DecodeString(v[0])
		rest, tagged := strings.CutPrefix(string(raw), kind+":")
		if err != nil || !tagged || rest == "" {
			return refuse("bad_cursor", "cursor %s is not one this listing gave; send the next_cursor of its previous page, or none to start again", httpapi.Describe(v[0]))
		}
		req.cursor = rest
	}
	return req, true
}

// encodeCursor makes the opaque cursor of a listing (kind is its tag).
func encodeCursor(kind, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + key))
}

// The cursor tags of the listings; a version in each lets their keys change.
const (
	sessionCursor = "s1"
	scopeCursor   = "c1"
)

// sessionStates are the states ?state= takes.
var sessionStates = []string{
	string(tokens.StateOK), string(tokens.StateWarning), string(tokens.StateError),
	string(tokens.StateAutoCompact), string(tokens.StateBlocking),
}

// listSessions answers a page of the tenant's sessions, newest first.
// Filters: ?state= (comma-separated or repeated), ?updated_after= (RFC
// 3339), ?agent=, ?scope= (a memory scope the session names; repeated:
// every one).
func (h *Handler) listSessions(w http.ResponseWriter, r *http.Request, tenant string) {
	ctx := r.Context()
	req, ok := h.readList(w, r, sessionCursor, []string{"state", "updated_after", "agent", "scope"}, []string{"state", "scope"})
	if !ok {
		return
	}
	refuse := func(code, format string, args ...any) {
		h.RefuseRequest(w, r, http.StatusBadRequest, code, fmt.Sprintf(format, args...))
	}
	f := store.SessionFilter{Limit: req.limit + 1}
	if req.cursor != "" {
		micros, id, _ := strings.Cut(req.cursor, ":")
		n, err := strconv.ParseInt(micros, 10, 64)
		if err != nil || n <= 0 || !turn.ValidToken(id) {
			refuse("bad_cursor", "cursor %s is not one this listing gave; send the next_cursor of its previous page, or none to start again", httpapi.Describe(req.q.Get("cursor")))
			return
		}
		f.Before = store.SessionKey{CreatedAt: time.UnixMicro(n).UTC(), SessionID: id}
	}
	for _, v := range req.q["state"] {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); !slices.Contains(sessionStates, s) {
				refuse("bad_filter", "state %s: want one or more of %s, comma-separated", httpapi.Describe(s), strings.Join(sessionStates, ", "))
				return
			}
			if !slices.Contains(f.States, s) {
				f.States = append(f.States, s)
			}
		}
	}
	if v := req.q.Get("updated_after"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			refuse("bad_filter", "updated_after %s: want an RFC 3339 time such as 2026-11-22T10:00:00Z", httpapi.Describe(v))
			return
		}
		f.UpdatedAfter = t
	}
	if v, ok := req.q["agent"]; ok {
		if !turn.ValidToken(v[0]) {
			refuse("bad_filter", "agent %s: agent ids are 1 to %d ASCII letters, digits, '_' and '-', starting with a letter or a digit", httpapi.Describe(v[0]), turn.MaxIDLen)
			return
		}
		f.AgentID = v[0]
	}
	for _, v := range req.q["scope"] {
		sc, err := memory.ParseScope(v)
		if e, bad := memory.AsError(err); bad {
			refuse("bad_filter", "scope: %s", e.Detail)
			return
		}
		if f.MemoryScope == nil {
			f.MemoryScope = map[string]string{}
		}
		if had, ok := f.MemoryScope[string(sc.Kind)]; ok && had != sc.ID {
			refuse("bad_filter", "scope names two %s scopes (%s and %s); a session names one scope of each kind", sc.Kind, had, sc.ID)
			return
		}
		f.MemoryScope[string(sc.Kind)] = sc.ID
	}

	set, err := h.settings.For(ctx, tenant)
	if err != nil {
		h.Internal(w, "reading tenant settings", err)
		return
	}
	var sessions []sessionstate.Session
	err = h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		var err error
		sessions, err = tx.ListSessions(ctx, f)
		return err
	})
	if err != nil {
		h.Internal(w, "listing sessions", err)
		return
	}
	out := api.SessionList{Items: make([]api.Session, 0, min(len(sessions), req.limit))}
	for i, s := range sessions {
		if i == req.limit {
			last := sessions[i-1]
			out.NextCursor = encodeCursor(sessionCursor, strconv.FormatInt(last.CreatedAt.UnixMicro(), 10)+":"+last.SessionID)
			break
		}
		out.Items = append(out.Items, sessionState(set, s))
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// sessionState is a session as the API shows it.
func sessionState(set tenantcfg.Settings, s sessionstate.Session) api.Session {
	out := api.Session{
		SessionID: s.SessionID, AgentID: s.AgentID, Model: s.Model, MemoryScope: s.MemoryScope,
		AppliedSeq: s.AppliedSeq, Messages: s.MessageCount,
		Tokens:             accounting.Status(accounting.Limits(set.Tokens, s), s.TokenCount),
		CompactionInFlight: s.CompactionInFlight, AutoCompactEnabled: s.AutoCompactEnabled,
		AutoCompact:     set.Compaction.Compacts(s),
		CompactRequests: s.CompactRequests, ThrashHeld: s.ThrashHeld, ToolCallsTotal: s.ToolCallsTotal, RejectedTurns: s.RejectedTurns,
		SkippedSeqs: s.SkippedSeqs, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
	}
	if s.LastSkippedTo > 0 {
		out.LastSkipped = &api.SeqRange{From: s.LastSkippedFrom, To: s.LastSkippedTo}
	}
	if !s.LastResponseAt.IsZero() {
		out.LastResponseAt = &s.LastResponseAt
	}
	return out
}

// listScopes answers a page of the tenant's scopes that hold memories, in
// name order. Filters: ?kind= (user, project, local, agent), ?prefix= (the
// scope's name starts with it, e.h. project:repo).
func (h *Handler) listScopes(w http.ResponseWriter, r *http.Request, tenant string) {
	ctx := r.Context()
	req, ok := h.readList(w, r, scopeCursor, []string{"kind", "prefix"}, nil)
	if !ok {
		return
	}
	refuse := func(code, format string, args ...any) {
		h.RefuseRequest(w, r, http.StatusBadRequest, code, fmt.Sprintf(format, args...))
	}
	f := store.ScopeFilter{Limit: req.limit + 1}
	if req.cursor != "" {
		if _, err := memory.ParseScope(req.cursor); err != nil {
			refuse("bad_cursor", "cursor %s is not one this listing gave; send the next_cursor of its previous page, or none to start again", httpapi.Describe(req.q.Get("cursor")))
			return
		}
		f.After = req.cursor
	}
	kind := ""
	if v, ok := req.q["kind"]; ok {
		if !slices.Contains(memory.Kinds, memory.Kind(v[0])) {
			refuse("bad_filter", "kind %s: want one of user, project, local, agent", httpapi.Describe(v[0]))
			return
		}
		kind = v[0] + ":"
	}
	prefix := req.q.Get("prefix")
	if len(prefix) > maxPrefixLen || strings.ContainsFunc(prefix, func(c rune) bool { return !scopeRune(c) }) {
		refuse("bad_filter", "prefix %s: want at most %d letters, digits, '_', '-' and ':', the start of a scope such as project:repo", httpapi.Describe(prefix), maxPrefixLen)
		return
	}
	f.Prefixes = []string{kind, prefix}

	var scopes []store.ScopeSummary
	err := h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		var err error
		scopes, err = tx.ListScopes(ctx, f)
		return err
	})
	if err != nil {
		h.Internal(w, "listing scopes", err)
		return
	}
	out := api.ScopeList{Items: make([]api.ScopeSummary, 0, min(len(scopes), req.limit))}
	for i, s := range scopes {
		if i == req.limit {
			out.NextCursor = encodeCursor(scopeCursor, scopes[i-1].Scope)
			break
		}
		k, id, _ := strings.Cut(s.Scope, ":")
		item := api.ScopeSummary{Scope: s.Scope, Kind: k, ID: id, Memories: s.Live, DeletedMemories: s.Deleted, UpdatedAt: s.UpdatedAt}
		if !s.LastConsolidatedAt.IsZero() {
			at := s.LastConsolidatedAt
			item.LastConsolidatedAt = &at
		}
		out.Items = append(out.Items, item)
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// scopeRune reports whether c may be part of a scope's name.
func scopeRune(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == ':'
}
