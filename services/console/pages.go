package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/context/sessionctx"
	ctxview "github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/dream"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// pageSize is how many sessions, scopes or dreams a list page shows.
const pageSize = 50

// maxTimelineTurns bounds the turns a session page reads and charts.
const maxTimelineTurns = 20_000

// sessionStates are the states the sessions filter offers.
var sessionStates = []string{
	string(tokens.StateOK), string(tokens.StateWarning), string(tokens.StateError),
	string(tokens.StateAutoCompact), string(tokens.StateBlocking),
}

// sessionRow is one session of the list.
type sessionRow struct {
	sessionstate.Session
	Tokens events.Tokens
}

// sessionsData is the sessions page's.
type sessionsData struct {
	Query, State, Agent, Scope, Sort string
	States                           []string
	Sorts                            []sortChoice
	Rows                             []sessionRow
	Next                             string // the next page's URL ("" on the last)
	Problem                          string
}

// sortChoice is one order the sessions page offers (?sort=).
type sortChoice struct {
	Value, Label string
	order        store.SessionOrder
}

// sessionSorts are the sessions page's orders; the first is the default.
var sessionSorts = []sortChoice{
	{"created", "Newest first", store.OrderCreated},
	{"activity", "Last activity", store.OrderActivity},
	{"size", "Size (tokens)", store.OrderSize},
}

// encodeSessionCursor is the ?cursor= of the page after last: its order's
// value and id, tagged with the order so another order's cursor is refused.
func encodeSessionCursor(sort string, last sessionstate.Session) string {
	v := last.CreatedAt.UnixMicro()
	switch sort {
	case "activity":
		v = last.UpdatedAt.UnixMicro()
	case "size":
		v = last.TokenCount
	}
	return sort + ":" + strconv.FormatInt(v, 10) + ":" + last.SessionID
}

// decodeSessionCursor reads a cursor of order sort back into a key.
func decodeSessionCursor(sort, cur string) (store.SessionKey, bool) {
	tag, rest, _ := strings.Cut(cur, ":")
	num, id, _ := strings.Cut(rest, ":")
	n, err := strconv.ParseInt(num, 10, 64)
	if tag != sort || err != nil || n < 0 || !turn.ValidToken(id) {
		return store.SessionKey{}, false
	}
	k := store.SessionKey{SessionID: id}
	switch sort {
	case "activity":
		k.UpdatedAt = time.UnixMicro(n).UTC()
	case "size":
		k.TokenCount = n
	default:
		k.CreatedAt = time.UnixMicro(n).UTC()
	}
	return k, true
}

// sessions lists the tenant's sessions through the same store query as
// GET /v1/sessions: newest first, or by last activity or size (?sort=).
// ?q= jumps to a session by its id.
func (c *Console) sessions(w http.ResponseWriter, r *http.Request, s signedIn) {
	ctx := r.Context()
	q := r.URL.Query()
	d := sessionsData{Query: strings.TrimSpace(q.Get("q")), State: q.Get("state"), Agent: strings.TrimSpace(q.Get("agent")),
		Scope: strings.TrimSpace(q.Get("scope")), States: sessionStates, Sorts: sessionSorts, Sort: q.Get("sort")}
	if d.Query != "" {
		if !turn.ValidToken(d.Query) {
			d.Problem = "Session ids are letters, digits, '_' and '-'."
		} else if _, err := c.cfg.Store.GetSession(ctx, s.tenant, d.Query); err == nil {
			http.Redirect(w, r, Prefix+"sessions/"+url.PathEscape(d.Query), http.StatusSeeOther)
			return
		} else if errors.Is(err, store.ErrNotFound) {
			d.Problem = "No session " + d.Query + "."
		} else {
			c.internal(w, r, s, "looking the session up", err)
			return
		}
	}
	f := store.SessionFilter{Limit: pageSize + 1}
	if d.Sort == "" {
		d.Sort = sessionSorts[0].Value
	}
	i := slices.IndexFunc(sessionSorts, func(c sortChoice) bool { return c.Value == d.Sort })
	if i < 0 {
		c.fail(w, r, s, http.StatusBadRequest, "Unknown order "+d.Sort+".")
		return
	}
	f.Order = sessionSorts[i].order
	if d.State != "" {
		if !slices.Contains(sessionStates, d.State) {
			c.fail(w, r, s, http.StatusBadRequest, "Unknown state "+d.State+".")
			return
		}
		f.States = []string{d.State}
	}
	if d.Agent != "" {
		if !turn.ValidToken(d.Agent) {
			c.fail(w, r, s, http.StatusBadRequest, "Agent ids are letters, digits, '_' and '-'.")
			return
		}
		f.AgentID = d.Agent
	}
	if d.Scope != "" {
		sc, err := memory.ParseScope(d.Scope)
		if err != nil {
			c.fail(w, r, s, http.StatusBadRequest, "A scope is kind:id, such as project:repo.")
			return
		}
		f.MemoryScope = map[string]string{string(sc.Kind): sc.ID}
	}
	if cur := q.Get("cursor"); cur != "" {
		k, ok := decodeSessionCursor(d.Sort, cur)
		if !ok {
			c.fail(w, r, s, http.StatusBadRequest, "That page link is not valid; start from the first page.")
			return
		}
		f.Before = k
	}
	set, err := c.cfg.Settings.For(ctx, s.tenant)
	if err != nil {
		c.internal(w, r, s, "reading the tenant's settings", err)
		return
	}
	var list []sessionstate.Session
	err = c.cfg.Store.InTx(ctx, s.tenant, func(tx *store.Tx) error {
		var err error
		list, err = tx.ListSessions(ctx, f)
		return err
	})
	if err != nil {
		c.internal(w, r, s, "listing sessions", err)
		return
	}
	for i, sess := range list {
		if i == pageSize {
			last := list[i-1]
			next := url.Values{}
			for k, v := range map[string]string{"state": d.State, "agent": d.Agent, "scope": d.Scope, "sort": d.Sort} {
				if v != "" {
					next.Set(k, v)
				}
			}
			next.Set("cursor", encodeSessionCursor(d.Sort, last))
			d.Next = Prefix + "sessions?" + next.Encode()
			break
		}
		d.Rows = append(d.Rows, sessionRow{Session: sess, Tokens: accounting.Status(accounting.Limits(set.Tokens, sess), sess.TokenCount)})
	}
	c.render(w, http.StatusOK, "sessions", c.signedView(s, "sessions", "Sessions", d))
}

// chartData is what the token chart script reads (as JSON in a data attribute).
type chartData struct {
	Seq         []int64     `json:"seq"`
	Tokens      []int64     `json:"tokens"`
	Warning     int64       `json:"warning"`
	AutoCompact int64       `json:"autocompact"`
	Blocking    int64       `json:"blocking"`
	Marks       []chartMark `json:"marks"`
}

// chartMark is a compaction on the chart, at the last turn applied before it was asked for.
type chartMark struct {
	Seq    int64  `json:"seq"`
	Label  string `json:"label"`
	Pre    int64  `json:"pre"`
	Post   int64  `json:"post"`
	Method string `json:"method"`
}

// compactionRow is a compaction as the session page lists it.
type compactionRow struct {
	store.Compaction
	AtSeq int64
}

// sessionData is the session page's.
type sessionData struct {
	Session     sessionstate.Session
	Tokens      events.Tokens
	Turns       []store.TurnPoint
	Compactions []compactionRow
	Notes       store.Notes
	Context     store.ContextSize
	// Messages is the current context as stored: the latest compaction's
	// head, then the messages kept after it (the last maxContextMessages).
	Messages        []contextMessage
	MessagesOmitted int
	ContextTooLarge bool
	Chart           string // chartData as JSON
	Truncated       bool
	// Agents are the threads the model proxy follows under this session
	// id, each with its Mnemos session's count and state.
	Agents []agentRow
}

// agentRow is one thread of a proxied session.
type agentRow struct {
	store.Thread
	Tokens int64
	State  string
}

// maxContextMessages bounds the context messages a session page lists.
const maxContextMessages = 500

// previewRunes is how much of a message's text the context list shows.
const previewRunes = 240

// contextMessage is one message of the current context, as listed.
type contextMessage struct {
	// Anchor is the row's id, for a stored message (messageAnchor); ""
	// for the messages the compaction made.
	Anchor  string
	Round   int64
	Role    string
	Kinds   string // its blocks' types
	Tokens  int64
	Preview string
	Head    bool // made by the compaction
}

// contextMessages lists a session's stored context for people: each
// message's role, block types and the start of its text.
func contextMessages(st sessionctx.State) ([]contextMessage, int) {
	all := make([]contextMessage, 0, len(st.Head)+len(st.Messages))
	for i, group := range [][]ctxview.Message{st.Head, st.Messages} {
		for _, m := range group {
			cm := contextMessage{Round: m.Round, Role: m.Role, Tokens: m.Tokens, Head: i == 0,
				Kinds: blockKinds(m.Content), Preview: preview(m.Content)}
			if m.Position >= 0 {
				cm.Anchor = messageAnchor(m.Position)
			}
			all = append(all, cm)
		}
	}
	omitted := max(len(all)-maxContextMessages, 0)
	return all[omitted:], omitted
}

func blockKinds(c turn.Content) string {
	kinds := make([]string, 0, len(c))
	for _, b := range c {
		if !slices.Contains(kinds, b.Type) {
			kinds = append(kinds, b.Type)
		}
	}
	return strings.Join(kinds, ", ")
}

// preview is the start of a message's text: its text blocks, tool calls'
// names and tool results' text.
func preview(c turn.Content) string {
	var sb strings.Builder
	var walk func(turn.Content)
	walk = func(c turn.Content) {
		for _, b := range c {
			if sb.Len() > previewRunes*4 {
				return
			}
			switch b.Type {
			case "text":
				sb.WriteString(b.Text + " ")
			case "tool_use":
				sb.WriteString("[" + b.Name + "] ")
			case "tool_result":
				if b.Content != nil {
					walk(*b.Content)
				}
			}
		}
	}
	walk(c)
	r := []rune(strings.TrimSpace(sb.String()))
	if len(r) > previewRunes {
		return string(r[:previewRunes]) + "…"
	}
	return string(r)
}

// sessionPage shows one session: the token chart, its turns, the current
// context's size, its notes and each compaction's summary.
func (c *Console) sessionPage(w http.ResponseWriter, r *http.Request, s signedIn) {
	ctx := r.Context()
	id := r.PathValue("id")
	if !turn.ValidToken(id) {
		c.fail(w, r, s, http.StatusNotFound, "No such session.")
		return
	}
	set, err := c.cfg.Settings.For(ctx, s.tenant)
	if err != nil {
		c.internal(w, r, s, "reading the tenant's settings", err)
		return
	}
	var d sessionData
	var cs []store.Compaction
	err = c.cfg.Store.InTx(ctx, s.tenant, func(tx *store.Tx) error {
		var err error
		if d.Session, err = tx.Session(ctx, id); err != nil {
			return err
		}
		if d.Turns, err = tx.TurnTimeline(ctx, id, maxTimelineTurns+1); err != nil {
			return err
		}
		if cs, err = tx.Compactions(ctx, id); err != nil {
			return err
		}
		if d.Context, err = tx.ContextSize(ctx, id); err != nil {
			return err
		}
		if d.Context.Bytes > c.cfg.ContextListBytes {
			d.ContextTooLarge = true // the API's context route admits such reads; a page does not make them
		} else {
			st, err := sessionctx.LoadFor(ctx, tx, d.Session)
			if err != nil {
				return err
			}
			d.Messages, d.MessagesOmitted = contextMessages(st)
		}
		threads, err := tx.Threads(ctx, id)
		if err != nil {
			return err
		}
		for _, th := range threads {
			row := agentRow{Thread: th, State: "ok"}
			if ts, err := tx.Session(ctx, th.ThreadID); err == nil {
				row.Tokens, row.State = ts.TokenCount, ts.State
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			d.Agents = append(d.Agents, row)
		}
		d.Notes, err = tx.Notes(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			err = nil
		}
		return err
	})
	if c.sessionFailed(w, r, s, err) {
		return
	}
	if len(d.Turns) > maxTimelineTurns {
		d.Turns, d.Truncated = d.Turns[:maxTimelineTurns], true
	}
	lim := accounting.Limits(set.Tokens, d.Session)
	d.Tokens = accounting.Status(lim, d.Session.TokenCount)
	chart := chartData{Warning: lim.Warning, AutoCompact: lim.AutoCompact, Blocking: lim.Blocking,
		Seq: make([]int64, len(d.Turns)), Tokens: make([]int64, len(d.Turns)), Marks: []chartMark{}}
	for i, t := range d.Turns {
		chart.Seq[i], chart.Tokens[i] = t.Seq, t.TokenCount
	}
	for _, comp := range cs {
		row := compactionRow{Compaction: comp, AtSeq: seqBefore(d.Turns, comp.CreatedAt)}
		d.Compactions = append(d.Compactions, row)
		if comp.Status == "completed" && row.AtSeq > 0 {
			chart.Marks = append(chart.Marks, chartMark{Seq: row.AtSeq, Label: comp.Trigger + " " + comp.Method,
				Pre: comp.PreTokens, Post: comp.PostTokens, Method: comp.Method})
		}
	}
	raw, err := json.Marshal(chart)
	if err != nil {
		c.internal(w, r, s, "drawing the chart", err)
		return
	}
	d.Chart = string(raw)
	c.render(w, http.StatusOK, "session", c.signedView(s, "sessions", "Session "+id, d))
}

// seqBefore is the seq of the last turn applied at or before at (the
// first turn's when none was): where a compaction asked for at is marked.
func seqBefore(turns []store.TurnPoint, at time.Time) int64 {
	var seq int64
	for _, t := range turns {
		if t.AppliedAt.After(at) {
			break
		}
		seq = t.Seq
	}
	if seq == 0 && len(turns) > 0 {
		seq = turns[0].Seq
	}
	return seq
}

// scopesData is the memories page's.
type scopesData struct {
	Scopes []store.ScopeSummary
	Next   string
}

// scopes lists the tenant's scopes that hold memories, as GET /v1/scopes does.
func (c *Console) scopes(w http.ResponseWriter, r *http.Request, s signedIn) {
	ctx := r.Context()
	after := r.URL.Query().Get("after")
	if after != "" {
		if _, err := memory.ParseScope(after); err != nil {
			c.fail(w, r, s, http.StatusBadRequest, "That page link is not valid; start from the first page.")
			return
		}
	}
	var d scopesData
	err := c.cfg.Store.InTx(ctx, s.tenant, func(tx *store.Tx) error {
		var err error
		d.Scopes, err = tx.ListScopes(ctx, store.ScopeFilter{After: after, Limit: pageSize + 1})
		return err
	})
	if err != nil {
		c.internal(w, r, s, "listing scopes", err)
		return
	}
	if len(d.Scopes) > pageSize {
		d.Scopes = d.Scopes[:pageSize]
		d.Next = Prefix + "memories?after=" + url.QueryEscape(d.Scopes[pageSize-1].Scope)
	}
	c.render(w, http.StatusOK, "scopes", c.signedView(s, "memories", "Memories", d))
}

// sessionFailed answers a read of a session that failed with err: 404
// when the tenant has no such session, 500 otherwise. It reports whether
// err was a failure.
func (c *Console) sessionFailed(w http.ResponseWriter, r *http.Request, s signedIn, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, store.ErrNotFound):
		c.fail(w, r, s, http.StatusNotFound, "No such session.")
	default:
		c.internal(w, r, s, "reading the session", err)
	}
	return true
}

// scopeOf reads the {scope} path value, or answers 404.
func (c *Console) scopeOf(w http.ResponseWriter, r *http.Request, s signedIn) (memory.Scope, bool) {
	sc, err := memory.ParseScope(r.PathValue("scope"))
	if err != nil {
		c.fail(w, r, s, http.StatusNotFound, "No such scope.")
		return memory.Scope{}, false
	}
	return sc, true
}

// memoryOf reads the {scope} and {name} path values, or answers 404.
func (c *Console) memoryOf(w http.ResponseWriter, r *http.Request, s signedIn) (memory.Scope, memory.Name, bool) {
	sc, ok := c.scopeOf(w, r, s)
	if !ok {
		return sc, "", false
	}
	name, err := memory.ParseName(r.PathValue("name"))
	if err != nil {
		c.fail(w, r, s, http.StatusNotFound, "No such memory.")
		return sc, "", false
	}
	return sc, name, true
}

// scopeData is a scope page's.
type scopeData struct {
	Scope    string
	Index    memory.Index
	Memories []memory.Memory
	Dreams   []dream.Dream
	// Search is the search box and its hits; nil without a searcher.
	Search *scopeSearch
}

// scopePage shows a scope's search box and what it found (?q=, ?source=),
// its MEMORY.md index, its memory files (deleted ones too) and its latest
// dreams. A scope that holds no memory is shown only when the search
// found something in its sessions.
func (c *Console) scopePage(w http.ResponseWriter, r *http.Request, s signedIn) {
	ctx := r.Context()
	sc, ok := c.scopeOf(w, r, s)
	if !ok {
		return
	}
	d := scopeData{Scope: sc.String()}
	status := http.StatusOK
	if c.cfg.Search != nil {
		found, err := c.searchScope(ctx, r, s.tenant, sc)
		if err != nil {
			c.internal(w, r, s, "searching the scope", err)
			return
		}
		if found.Problem != "" {
			status = http.StatusBadRequest
		}
		d.Search = &found
	}
	var err error
	if d.Index, err = c.cfg.Memories.Index(ctx, s.tenant, sc); err != nil {
		c.internal(w, r, s, "reading the index", err)
		return
	}
	if d.Memories, err = c.cfg.Memories.List(ctx, s.tenant, sc, memory.ListOptions{IncludeDeleted: true}); err != nil {
		c.internal(w, r, s, "listing memories", err)
		return
	}
	if d.Dreams, err = c.cfg.Dreams.List(ctx, s.tenant, sc, 10); err != nil {
		c.internal(w, r, s, "listing dreams", err)
		return
	}
	if d.Index.Revision == 0 && len(d.Memories) == 0 && len(d.Dreams) == 0 && (d.Search == nil || len(d.Search.Hits) == 0) {
		c.fail(w, r, s, http.StatusNotFound, "No such scope, or it holds no memories.")
		return
	}
	c.render(w, status, "scope", c.signedView(s, "memories", "Scope "+sc.String(), d))
}

// memoryData is a memory page's.
type memoryData struct {
	Scope     string
	Memory    memory.Memory
	Markdown  string
	Revisions []memory.Revision
	From, To  int64
	Diff      string
}

// memoryPage shows a memory, its revisions, and the diff between two of
// them (?from= and ?to=; the latest and the one before by default).
func (c *Console) memoryPage(w http.ResponseWriter, r *http.Request, s signedIn) {
	ctx := r.Context()
	sc, name, ok := c.memoryOf(w, r, s)
	if !ok {
		return
	}
	m, err := c.cfg.Memories.GetAny(ctx, s.tenant, sc, name)
	if errors.Is(err, memory.ErrNotFound) {
		c.fail(w, r, s, http.StatusNotFound, "No such memory.")
		return
	}
	if err != nil {
		c.internal(w, r, s, "reading the memory", err)
		return
	}
	d := memoryData{Scope: sc.String(), Memory: m, Markdown: m.Markdown()}
	if d.Revisions, err = c.cfg.Memories.Revisions(ctx, s.tenant, sc, name); err != nil {
		c.internal(w, r, s, "listing revisions", err)
		return
	}
	q := r.URL.Query()
	d.To, d.From = m.Revision, max(m.Revision-1, 1)
	for _, p := range []struct {
		name string
		to   *int64
	}{{"from", &d.From}, {"to", &d.To}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 || n > m.Revision {
				c.fail(w, r, s, http.StatusBadRequest, "Revisions are numbered 1 to "+strconv.FormatInt(m.Revision, 10)+".")
				return
			}
			*p.to = n
		}
	}
	if d.From != d.To {
		if d.Diff, err = c.cfg.Memories.Diff(ctx, s.tenant, sc, name, d.From, d.To); err != nil {
			c.internal(w, r, s, "diffing revisions", err)
			return
		}
	}
	// Newest first, as people read a history.
	slices.Reverse(d.Revisions)
	c.render(w, http.StatusOK, "memory", c.signedView(s, "memories", string(name), d))
}

// restore rolls a memory back to the revision the form names, through the
// memory store as POST …/revisions/{rev}/restore does (actor api).
func (c *Console) restore(w http.ResponseWriter, r *http.Request, s signedIn) {
	ctx := r.Context()
	sc, name, ok := c.memoryOf(w, r, s)
	if !ok {
		return
	}
	rev, err := strconv.ParseInt(r.PostFormValue("revision"), 10, 64)
	if err != nil || rev < 1 {
		c.fail(w, r, s, http.StatusBadRequest, "Choose a revision to restore.")
		return
	}
	ch := memory.Change{Actor: memory.ActorAPI, Reason: "restored from the console"}
	_, err = c.cfg.Memories.Rollback(ctx, s.tenant, sc, name, rev, ch, memory.Expect{})
	if errors.Is(err, memory.ErrNotFound) {
		c.fail(w, r, s, http.StatusNotFound, "No such memory or revision.")
		return
	}
	if e, refused := memory.AsError(err); refused {
		c.fail(w, r, s, http.StatusConflict, "Not restored: "+e.Detail)
		return
	}
	if err != nil {
		c.internal(w, r, s, "restoring the memory", err)
		return
	}
	http.Redirect(w, r, Prefix+"memories/"+url.PathEscape(sc.String())+"/"+url.PathEscape(string(name)), http.StatusSeeOther)
}

// dreamsData is the dreams page's: each scope with its latest dreams.
type dreamsData struct {
	Scopes []scopeDreams
}

type scopeDreams struct {
	Scope  string
	Dreams []dream.Dream
}

// dreams lists the latest dreams of each scope (the first pageSize scopes).
func (c *Console) dreams(w http.ResponseWriter, r *http.Request, s signedIn) {
	ctx := r.Context()
	var scopes []store.ScopeSummary
	err := c.cfg.Store.InTx(ctx, s.tenant, func(tx *store.Tx) error {
		var err error
		scopes, err = tx.ListScopes(ctx, store.ScopeFilter{Limit: pageSize})
		return err
	})
	if err != nil {
		c.internal(w, r, s, "listing scopes", err)
		return
	}
	var d dreamsData
	for _, sum := range scopes {
		sc, err := memory.ParseScope(sum.Scope)
		if err != nil {
			continue // a stored scope always parses
		}
		ds, err := c.cfg.Dreams.List(ctx, s.tenant, sc, 5)
		if err != nil {
			c.internal(w, r, s, "listing dreams", err)
			return
		}
		if len(ds) > 0 {
			d.Scopes = append(d.Scopes, scopeDreams{Scope: sum.Scope, Dreams: ds})
		}
	}
	c.render(w, http.StatusOK, "dreams", c.signedView(s, "dreams", "Dreams", d))
}

// dreamOf reads the {id} dream, or answers 404.
func (c *Console) dreamOf(w http.ResponseWriter, r *http.Request, s signedIn) (dream.Dream, bool) {
	id := r.PathValue("id")
	d, err := c.cfg.Dreams.Get(r.Context(), s.tenant, id)
	if errors.Is(err, dream.ErrNotFound) {
		c.fail(w, r, s, http.StatusNotFound, "No such dream.")
		return dream.Dream{}, false
	}
	if err != nil {
		c.internal(w, r, s, "reading the dream", err)
		return dream.Dream{}, false
	}
	return d, true
}

// dreamPage shows a dream, and a proposal's edits with its approve button.
func (c *Console) dreamPage(w http.ResponseWriter, r *http.Request, s signedIn) {
	d, ok := c.dreamOf(w, r, s)
	if !ok {
		return
	}
	c.render(w, http.StatusOK, "dream", c.signedView(s, "dreams", "Dream "+d.ID, d))
}

// approve applies a proposal the deletion guard held, as POST
// /v1/dreams/{id}/approve does.
func (c *Console) approve(w http.ResponseWriter, r *http.Request, s signedIn) {
	d, ok := c.dreamOf(w, r, s)
	if !ok {
		return
	}
	if _, err := c.cfg.Dreams.Approve(r.Context(), s.tenant, d.ID); err != nil {
		var de *dream.Error
		if errors.As(err, &de) {
			c.fail(w, r, s, http.StatusConflict, "Not approved: "+de.Detail)
			return
		}
		c.internal(w, r, s, "approving the dream", err)
		return
	}
	http.Redirect(w, r, Prefix+"dreams/"+url.PathEscape(d.ID), http.StatusSeeOther)
}

// reject ends a proposal without applying it (dream.Reject).
func (c *Console) reject(w http.ResponseWriter, r *http.Request, s signedIn) {
	d, ok := c.dreamOf(w, r, s)
	if !ok {
		return
	}
	if _, err := c.cfg.Dreams.Reject(r.Context(), s.tenant, d.ID, "from the console"); err != nil {
		var de *dream.Error
		if errors.As(err, &de) {
			c.fail(w, r, s, http.StatusConflict, "Not rejected: "+de.Detail)
			return
		}
		c.internal(w, r, s, "rejecting the dream", err)
		return
	}
	http.Redirect(w, r, Prefix+"dreams/"+url.PathEscape(d.ID), http.StatusSeeOther)
}

// usageData is the usage page's: the LLM ledger's rows and their totals,
// with what they cost in dollars, and the agent's proxied rounds by day
// beside what they would have cost straight.
type usageData struct {
	Rows   []usageRow
	Totals usageRow
	// Proxy is by day, oldest first; empty when no round was priced.
	Proxy      []proxyDay
	ProxyTotal proxyDay
}

// usageRow is a row of the ledger and its cost as exact dollars.
type usageRow struct {
	store.LLMUsage
	Cost string
}

func costRow(u store.LLMUsage) usageRow {
	return usageRow{LLMUsage: u, Cost: llm.USD(u.CostNanoUSD).String()}
}

// proxyDay is a day's proxied rounds (or all of them), in exact dollars:
// through Mnemos, straight, saved (straight less through), and net saved
// (straight less everything the day's calls cost, Mnemos's own among them).
type proxyDay struct {
	Day                           string
	Rounds                        int64
	Through, Straight, Saved, Net string
}

func proxyRow(day string, proxy, all store.LLMUsage) proxyDay {
	return proxyDay{
		Day: day, Rounds: proxy.Calls, Through: llm.USD(proxy.CostNanoUSD).String(), Straight: llm.USD(proxy.StraightNanoUSD).String(),
		Saved: llm.USD(proxy.StraightNanoUSD - proxy.CostNanoUSD).String(), Net: llm.USD(proxy.StraightNanoUSD - all.CostNanoUSD).String(),
	}
}

// usage shows the tenant's model calls, tokens and their cost by day,
// service (task) and model: the LLM ledger the daily budgets are kept with;
// and the agent's proxied rounds by day, through Mnemos and straight.
func (c *Console) usage(w http.ResponseWriter, r *http.Request, s signedIn) {
	rows, err := c.cfg.Store.LLMUsageOf(r.Context(), s.tenant)
	if err != nil {
		c.internal(w, r, s, "reading usage", err)
		return
	}
	var d usageData
	var total, proxyTotal store.LLMUsage
	var days []string
	all, proxy := map[string]store.LLMUsage{}, map[string]store.LLMUsage{}
	for _, u := range rows {
		d.Rows = append(d.Rows, costRow(u))
		total = total.Add(u)
		day := u.Day.Format(time.DateOnly)
		if _, seen := all[day]; !seen {
			days = append(days, day)
		}
		all[day] = all[day].Add(u)
		if u.Task == store.TaskProxy {
			proxy[day] = proxy[day].Add(u)
			proxyTotal = proxyTotal.Add(u)
		}
	}
	d.Totals = costRow(total)
	for _, day := range days {
		if p, ok := proxy[day]; ok {
			d.Proxy = append(d.Proxy, proxyRow(day, p, all[day]))
		}
	}
	d.ProxyTotal = proxyRow("", proxyTotal, total)
	c.render(w, http.StatusOK, "usage", c.signedView(s, "usage", "Usage", d))
}
