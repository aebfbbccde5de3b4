// Package mcpapi serves the Model Context Protocol at /mcp: an agent's MCP
// client reaches its tenant's memory files, offloaded tool results, its
// session's stored messages and recall as tools.
package mcpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/memtools"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/search"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
	"github.com/mnemos-ai/mnemos/services/gateway/searchapi"
)

// The Model Context Protocol at /mcp (streamable HTTP, stateless): an
// agent's MCP client reaches its tenant's memory files, offloaded tool
// results, its session's stored messages and recall as four tools. The
// request's API key names the tenant, as on every route; the agent headers
// (httpapi's AgentKey and agent headers) name the memory scope and the session (docs/mcp.md).

// Handler serves /mcp.
type Handler struct {
	httpapi.Base
	store    *store.Store
	settings *tenantcfg.Cache
	memories *memory.Store
	recall   *recall.Recaller // nil: the recall tool answers that it is unavailable
	search   *search.Searcher
}

// New serves MCP over st's sessions and memories, searched by s; recall
// may be nil.
func New(base httpapi.Base, st *store.Store, settings *tenantcfg.Cache, memories *memory.Store, rc *recall.Recaller, s *search.Searcher) *Handler {
	return &Handler{Base: base, store: st, settings: settings, memories: memories, recall: rc, search: s}
}

// UseRecall serves the recall tool with r.
func (h *Handler) UseRecall(r *recall.Recaller) { h.recall = r }

// The MCP tools' names.
const (
	mcpToolMemory     = "memory"
	mcpToolToolResult = "read_tool_result"
	mcpToolSearch     = "search_past_context"
	mcpToolRecall     = "recall"
)

// Bounds of the MCP tools' answers and inputs.
const (
	defaultToolResultChars = 20_000
	maxToolResultChars     = 100_000
	maxSnippetChars        = 300
)

// Register adds /mcp to mux: POST for requests, GET answered 405 by the
// stateless transport.
func (h *Handler) Register(mux httpapi.Mux) {
	serve := h.Keys.Auth(httpapi.Mnemos, httpapi.AgentKey, store.ScopeRead, h.serveMCP)
	mux.Handle("POST /mcp", serve)
	// GET would open a stream for messages the server starts; a stateless
	// server starts none, and the transport answers 405 with Allow: POST.
	mux.Handle("GET /mcp", serve)
}

// serveMCP answers one MCP request of tenant with a server whose tools are
// bound to the request's tenant and headers. The transport is stateless:
// every request stands alone, so no session can be taken over with
// another tenant's key.
func (h *Handler) serveMCP(w http.ResponseWriter, r *http.Request, tenant string) {
	grant, _ := httpapi.GrantOf(r.Context())
	srv := h.mcpServer(mcpCall{h: h, tenant: tenant, header: r.Header, grant: grant})
	mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: h.Log}).ServeHTTP(w, r)
}

func (h *Handler) mcpServer(c mcpCall) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mnemos", Title: "Mnemos memory and context"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: mcpToolMemory, Description: "Read and edit the long-term memory files of your memory scope, kept across sessions, in the directory " +
		"/memories: MEMORY.md (the index, one line per memory) and one <name>.md per memory. A memory file is markdown opening with a " +
		"frontmatter of name (the file name without .md: lowercase letters, digits, '-' and '_'), description (one line; recall picks memories by it) " +
		"and type (user, feedback, project or reference), between '---' lines, then the body. Commands: view (the directory, or a file's lines " +
		"numbered from 1, optionally view_range [first, last]); create (path, file_text: writes the whole file, replacing it if it exists); " +
		"str_replace (path, old_str, new_str: old_str must occur exactly once); insert (path, insert_line, insert_text: after that line, 0 for " +
		"the top); delete (path: deleted memories can be restored by an operator); rename (old_path, new_path). Every change is kept as a " +
		"revision. Save only what is worth knowing in later sessions, never what the code or its history already says."}, c.memory)
	mcp.AddTool(s, &mcp.Tool{Name: mcpToolToolResult, Description: "Read a tool result that was too large to keep in the conversation: the id is the one its " +
		"<persisted-output> preview names ('stored as tool result <id>'). offset and limit count characters (Unicode code points, not bytes " +
		"or lines): offset is where to start (0 by default), limit how many to return (20,000 by default, at most 100,000). The answer says " +
		"how many characters the whole result holds, so a long one can be read a part at a time."}, c.toolResult)
	mcp.AddTool(s, &mcp.Tool{Name: mcpToolSearch, Description: "Search past context: the long-term memory files of your memory scope " +
		"and the messages of every session of that scope, this one and earlier ones, those a compaction has since replaced with a summary " +
		"included. Write the query in plain words: any word may match, rarer words count more, and word forms match each other (talked, " +
		"talking); \"quoted phrases\" must match and -word leaves out what holds the word. Answers the best hits first, each a memory (its " +
		"name) or a message (its session, position and role) with a snippet, the matches between « and ». scope names another scope " +
		"(project:<id>, user:<id>, local:<id>, agent:<type>); session limits the search to one session's messages; limit bounds the hits " +
		"(10 by default, at most 50)."}, c.search)
	mcp.AddTool(s, &mcp.Tool{Name: mcpToolRecall, Description: "Find the long-term memories that bear on a question or task: give the query in plain " +
		"words, and optionally the tools you have just used (recent_tools). Answers each relevant memory with its age and text; a memory is " +
		"shown at most once per session until the next compaction, so ask when the subject changes rather than repeating the same query."}, c.recallTool)
	return s
}

// mcpCall is what an MCP request's tools act for: the tenant its key
// names and the headers that name its scope and session.
type mcpCall struct {
	h      *Handler
	tenant string
	header http.Header
	grant  store.KeyGrant // what the request's key holds
}

// toolError is the tool result of a caller's mistake: the client shows it
// to the model, which can correct the call.
func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

func toolText(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// failed logs a failure of the system and returns the error the SDK
// answers with, which says what failed and nothing of the cause.
func (c mcpCall) failed(tool string, err error) error {
	c.h.Log.Error("mcp tool failed", "tool", tool, "tenant", c.tenant, "err", err)
	return fmt.Errorf("%s failed in the service; retry", tool)
}

// session is the session the headers name ("" when none); a bad id is a
// tool error.
func (c mcpCall) session() (string, *mcp.CallToolResult) {
	for _, h := range []string{httpapi.HeaderAgentSession, httpapi.HeaderClaudeCodeSession} {
		v := c.header.Get(h)
		if v == "" {
			continue
		}
		if !turn.ValidToken(v) {
			return "", toolError("%s: session ids are 1 to %d ASCII letters, digits, '_' and '-', starting with a letter or a digit; got %s", h, turn.MaxIDLen, httpapi.Describe(v))
		}
		return v, nil
	}
	return "", nil
}

// needSession is session, with a tool error when the headers name none.
func (c mcpCall) needSession(tool string) (string, *mcp.CallToolResult) {
	id, bad := c.session()
	if bad == nil && id == "" {
		return "", toolError("%s works on your session: configure the MCP server with the header %s (Claude Code sends %s itself)", tool, httpapi.HeaderAgentSession, httpapi.HeaderClaudeCodeSession)
	}
	return id, bad
}

// memoryScope is the memory_scope the request names: the user and project
// of its headers, else the memory_scope of its session as stored (nil
// when neither names one).
func (c mcpCall) memoryScope(ctx context.Context, session string) (map[string]string, *mcp.CallToolResult, error) {
	named := map[string]string{}
	for kind, h := range map[memory.Kind]string{memory.KindUser: httpapi.HeaderUser, memory.KindProject: httpapi.HeaderProject} {
		v := c.header.Get(h)
		if v == "" {
			continue
		}
		if _, err := memory.NewScope(kind, v); err != nil {
			return nil, toolError("%s: %v", h, err), nil
		}
		named[string(kind)] = v
	}
	if len(named) > 0 || session == "" {
		return named, nil, nil
	}
	s, err := c.h.store.GetSession(ctx, c.tenant, session)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return s.MemoryScope, nil, nil
}

// memory runs one command of the memory tool over the scope the tenant's
// extractions would write for the request's memory_scope (its
// extraction.write_scope order), as the session's agent when the headers
// name a session, else as the API.
func (c mcpCall) memory(ctx context.Context, _ *mcp.CallToolRequest, in memtools.FileCommand) (*mcp.CallToolResult, any, error) {
	if in.Command != "view" && !c.grant.Has(store.ScopeMemoryWrite) {
		return toolError("%s: %s", in.Command, httpapi.MissingScope(c.grant, store.ScopeMemoryWrite).Message), nil, nil
	}
	session, bad := c.session()
	if bad != nil {
		return bad, nil, nil
	}
	named, bad, err := c.memoryScope(ctx, session)
	if bad != nil || err != nil {
		return bad, nil, c.errorOf(mcpToolMemory, err)
	}
	set, err := c.h.settings.For(ctx, c.tenant)
	if err != nil {
		return nil, nil, c.failed(mcpToolMemory, err)
	}
	scope, ok := set.Extraction.Scope(named)
	if !ok {
		return toolError("no memory scope: configure the MCP server with the header %s or %s (or name a session whose turns name one)", httpapi.HeaderProject, httpapi.HeaderUser), nil, nil
	}
	b := memtools.Binding{Tenant: c.tenant, Scope: scope, Actor: memory.ActorAPI, Reason: "mcp memory " + in.Command}
	if session != "" {
		b.Actor, b.SessionID = memory.ActorAgent, session
	}
	ex, err := memtools.New(c.h.memories, b, memtools.Options{MaxDeletes: memtools.NoDeleteLimit})
	if err != nil {
		return nil, nil, c.failed(mcpToolMemory, err)
	}
	res, err := ex.FileCommand(ctx, in)
	if err != nil {
		return nil, nil, c.failed(mcpToolMemory, err)
	}
	if res.IsError {
		return toolError("%s", res.Text), nil, nil
	}
	return toolText(res.Text), nil, nil
}

// errorOf is failed for a non-nil err.
func (c mcpCall) errorOf(tool string, err error) error {
	if err == nil {
		return nil
	}
	return c.failed(tool, err)
}

func (c mcpCall) toolResult(ctx context.Context, _ *mcp.CallToolRequest, in api.ToolResultInput) (*mcp.CallToolResult, any, error) {
	switch {
	case !turn.ValidToken(in.ID):
		return toolError("id %s is not a tool result id (1 to %d ASCII letters, digits, '_' and '-')", httpapi.Describe(in.ID), turn.MaxIDLen), nil, nil
	case in.Offset < 0:
		return toolError("offset %d: want 0 or more", in.Offset), nil, nil
	case in.Limit < 0 || in.Limit > maxToolResultChars:
		return toolError("limit %d: want 1 to %d characters", in.Limit, maxToolResultChars), nil, nil
	}
	limit := in.Limit
	if limit == 0 {
		limit = defaultToolResultChars
	}
	var tr store.ToolResult
	var expired bool
	err := c.h.store.InTx(ctx, c.tenant, func(tx *store.Tx) error {
		var err error
		tr, err = tx.ToolResult(ctx, in.ID)
		if errors.Is(err, store.ErrNotFound) {
			if expired, err = tx.ToolResultOffloaded(ctx, in.ID); err == nil {
				err = store.ErrNotFound
			}
		}
		return err
	})
	if errors.Is(err, store.ErrNotFound) && expired {
		return toolError("tool result %s has expired (the tenant's retention deleted it); the preview in context is what remains", in.ID), nil, nil
	}
	if errors.Is(err, store.ErrNotFound) {
		return toolError("no tool result %s", in.ID), nil, nil
	}
	if err != nil {
		return nil, nil, c.failed(mcpToolToolResult, err)
	}
	text := []rune(tr.Content)
	if in.Offset > len(text) {
		return toolError("offset %d is past the end: tool result %s holds %d characters", in.Offset, in.ID, len(text)), nil, nil
	}
	end := min(in.Offset+limit, len(text))
	head := fmt.Sprintf("Tool result %s (session %s, tool_use %s): characters %d to %d of %d", tr.ID, tr.SessionID, tr.ToolUseID, in.Offset, end, len(text))
	if end < len(text) {
		head += fmt.Sprintf("; read on with offset %d", end)
	}
	return toolText(head + ".\n\n" + string(text[in.Offset:end])), nil, nil
}

func (c mcpCall) search(ctx context.Context, _ *mcp.CallToolRequest, in api.SearchInput) (*mcp.CallToolResult, any, error) {
	session, bad := c.session()
	if bad != nil {
		return bad, nil, nil
	}
	scope, bad, err := c.searchScope(ctx, session, in.Scope)
	if bad != nil || err != nil {
		return bad, nil, c.errorOf(mcpToolSearch, err)
	}
	req := search.Request{Tenant: c.tenant, Scope: scope, Query: in.Query, Session: in.Session, Limit: in.Limit, Caller: search.CallerMCP}
	res, err := c.h.search.Search(ctx, req)
	var refused *search.InputError
	switch {
	case errors.As(err, &refused):
		return toolError("%s", refused.Detail), nil, nil
	case err != nil:
		return nil, nil, c.failed(mcpToolSearch, err)
	}
	out := toolText(searchText(req, res))
	out.StructuredContent = searchapi.Body(scope.String(), req.Query, res.Hits)
	return out, nil, nil
}

// searchScope is the scope a search covers: the one the call names, else
// the one the tenant's extractions would write for the headers' user and
// project, else for the memory_scope of the headers' session.
func (c mcpCall) searchScope(ctx context.Context, session, named string) (memory.Scope, *mcp.CallToolResult, error) {
	if named != "" {
		scope, err := search.ParseScope(named)
		if err != nil {
			return memory.Scope{}, toolError("scope: %v", c.h.search.Refused(ctx, search.CallerMCP, err)), nil
		}
		return scope, nil, nil
	}
	scopes, bad, err := c.memoryScope(ctx, session)
	if bad != nil || err != nil {
		return memory.Scope{}, bad, err
	}
	set, err := c.h.settings.For(ctx, c.tenant)
	if err != nil {
		return memory.Scope{}, nil, err
	}
	scope, ok := set.Extraction.Scope(scopes)
	if !ok {
		return memory.Scope{}, toolError("no memory scope to search: give scope (project:<id>, user:<id>…), or configure the MCP server with the header %s or %s (or %s naming a session whose turns name one)",
			httpapi.HeaderProject, httpapi.HeaderUser, httpapi.HeaderAgentSession), nil
	}
	return scope, nil, nil
}

// searchText is a search's answer as the model reads it.
func searchText(req search.Request, res search.Result) string {
	where := "scope " + req.Scope.String()
	if req.Session != "" {
		where = "session " + req.Session + " of " + where
	}
	if len(res.Hits) == 0 {
		return fmt.Sprintf("Nothing in %s matches %q.", where, req.Query)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d hits in %s for %q, best first (matches between « »):\n", len(res.Hits), where, req.Query)
	for _, h := range res.Hits {
		snippet := strings.Join(strings.Fields(h.Snippet), " ")
		if utf8.RuneCountInString(snippet) > maxSnippetChars {
			snippet = string([]rune(snippet)[:maxSnippetChars-1]) + "…"
		}
		at := h.Time.UTC().Format("2006-01-02 15:04")
		if h.Source == search.SourceMemory {
			fmt.Fprintf(&b, "- memory %s (updated %s): %s\n", h.Memory, at, snippet)
		} else {
			fmt.Fprintf(&b, "- session %s, position %d (%s, %s): %s\n", h.Session, h.Position, h.Role, at, snippet)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// recallTool recalls as POST /v1/sessions/{id}/recall does, for the
// request's session, from the headers' scopes or else the session's.
func (c mcpCall) recallTool(ctx context.Context, _ *mcp.CallToolRequest, in api.RecallInput) (*mcp.CallToolResult, any, error) {
	if c.h.recall == nil {
		return toolError("this Mnemos process serves no recall"), nil, nil
	}
	session, bad := c.needSession(mcpToolRecall)
	if bad != nil {
		return bad, nil, nil
	}
	if msg := recall.CheckRequest(in.Query, in.RecentTools, nil); msg != "" {
		c.h.recall.Refused(ctx, recall.SourceAPI)
		return toolError("%s", msg), nil, nil
	}
	named, bad, err := c.memoryScope(ctx, session)
	if bad != nil || err != nil {
		return bad, nil, c.errorOf(mcpToolRecall, err)
	}
	if len(named) == 0 {
		c.h.recall.Refused(ctx, recall.SourceAPI)
		return toolError("no memory scope: configure the MCP server with the header %s or %s (or name a session whose turns name one)", httpapi.HeaderProject, httpapi.HeaderUser), nil, nil
	}
	res, err := c.h.recall.Recall(ctx, recall.Query{
		Tenant: c.tenant, SessionID: session, MemoryScope: named, Text: in.Query, RecentTools: in.RecentTools, Source: recall.SourceAPI,
	})
	switch {
	case err != nil && res.Outcome == recall.OutcomeFailed:
		c.h.Log.Warn("recall selector failed", "tenant", c.tenant, "session", session, "err", err)
		return toolError("the memory selector failed: %v; retry", err), nil, nil
	case err != nil:
		return nil, nil, c.failed(mcpToolRecall, err)
	}
	if len(res.Memories) == 0 {
		return toolText(fmt.Sprintf("No memory to show (%s).", res.Outcome)), nil, nil
	}
	texts := make([]string, len(res.Memories))
	for i, m := range res.Memories {
		texts[i] = m.Text
	}
	return toolText(strings.Join(texts, "\n\n")), nil, nil
}
