package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/compactor"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

// headerTransport adds its headers to every request: the API key and the
// scope and session headers an MCP client is configured with.
type headerTransport struct {
	header http.Header
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.header {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpClient connects the go-sdk's own client to the harness's /mcp with
// headers (name, value pairs).
func (h *harness) mcpClient(t *testing.T, headers ...string) *mcp.ClientSession {
	t.Helper()
	hdr := http.Header{}
	for i := 0; i < len(headers); i += 2 {
		hdr.Set(headers[i], headers[i+1])
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "mnemos-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: h.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: headerTransport{hdr}},
	}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callTool calls a tool and returns its text and whether it is an error
// result; a protocol error fails the test.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, "%s %v", name, args)
	var texts []string
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		require.True(t, ok, "%s answers text", name)
		texts = append(texts, tc.Text)
	}
	return strings.Join(texts, "\n"), res.IsError
}

// okTool is callTool for a call that must succeed.
func okTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	text, isErr := callTool(t, cs, name, args)
	require.False(t, isErr, "%s %v: %s", name, args, text)
	return text
}

func TestMCPListsToolsAndRefusesBadKeys(t *testing.T) {
	t.Parallel()
	h := setup(t)
	for _, key := range []string{"Authorization", "X-Api-Key"} {
		value := "key-acme"
		if key == "Authorization" {
			value = "Bearer key-acme"
		}
		cs := h.mcpClient(t, key, value)
		tools, err := cs.ListTools(context.Background(), nil)
		require.NoError(t, err)
		var names []string
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
			require.NotEmpty(t, tool.Description, tool.Name)
		}
		require.ElementsMatch(t, []string{"memory", "read_tool_result", "search_past_context", "recall"}, names, "with the key in %s", key)
	}

	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, c := range []struct {
		name    string
		headers []string
		status  int
	}{
		{"no key", nil, http.StatusUnauthorized},
		{"unknown bearer key", []string{"Authorization", "Bearer nope"}, http.StatusUnauthorized},
		{"unknown x-api-key", []string{"X-Api-Key", "nope"}, http.StatusUnauthorized},
		{"two different keys", []string{"Authorization", "Bearer key-acme", "X-Api-Key", "key-globex"}, http.StatusBadRequest},
	} {
		req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/mcp", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for i := 0; i < len(c.headers); i += 2 {
			req.Header.Set(c.headers[i], c.headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var e api.ErrorBody
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e), c.name)
		resp.Body.Close()
		require.Equal(t, c.status, resp.StatusCode, c.name)
		require.NotEmpty(t, e.Error.Code, "%s: an Error body, before any MCP handling", c.name)
	}
}

func TestMCPMemoryCommands(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	h.saveSession(t, "s1", func(*sessionstate.Session) {})
	cs := h.mcpClient(t, "Authorization", "Bearer key-acme", "X-Mnemos-Project", "repo-x", "X-Mnemos-Session", "s1")
	mem := func(args map[string]any) string { t.Helper(); return okTool(t, cs, "memory", args) }

	require.Contains(t, mem(map[string]any{"command": "view", "path": "/memories"}), "0 memories")
	doc := memoryMarkdown("deploy-window", "Deploys happen on Tuesdays", "Deploy on Tuesdays only.")
	require.Contains(t, mem(map[string]any{"command": "create", "path": "/memories/deploy-window.md", "file_text": doc}), "Created deploy-window.md")
	listing := mem(map[string]any{"command": "view", "path": "/memories"})
	require.Contains(t, listing, "/memories/MEMORY.md")
	require.Contains(t, listing, "/memories/deploy-window.md [feedback]: Deploys happen on Tuesdays")

	view := mem(map[string]any{"command": "view", "path": "/memories/deploy-window.md", "view_range": []int{2, 3}})
	require.Equal(t, "/memories/deploy-window.md, lines 2 to 3 of 7:\n     2\tname: deploy-window\n     3\tdescription: Deploys happen on Tuesdays", view)
	require.Contains(t, mem(map[string]any{"command": "view", "path": "/memories/MEMORY.md"}), "(deploy-window.md)")

	mem(map[string]any{"command": "str_replace", "path": "/memories/deploy-window.md", "old_str": "Tuesdays only.", "new_str": "Tuesdays only, before noon."})
	mem(map[string]any{"command": "insert", "path": "/memories/deploy-window.md", "insert_line": 7, "insert_text": "**Why:** the on-call rota."})
	got := mem(map[string]any{"command": "view", "path": "/memories/deploy-window.md"})
	require.Contains(t, got, "7\tDeploy on Tuesdays only, before noon.\n     8\t**Why:** the on-call rota.")

	memories, err := memory.NewStore(h.store, nil, memory.Options{})
	require.NoError(t, err)
	scope := memory.Scope{Kind: memory.KindProject, ID: "repo-x"}
	revs, err := memories.Revisions(ctx, "acme", scope, "deploy-window")
	require.NoError(t, err)
	require.Len(t, revs, 3, "create, str_replace and insert each made a revision")
	for i, op := range []string{"create", "str_replace", "insert"} {
		require.Equal(t, memory.ActorAgent, revs[i].Change.Actor)
		require.Equal(t, "s1", revs[i].Change.SessionID)
		require.Equal(t, "mcp memory "+op, revs[i].Change.Reason)
	}

	require.Contains(t, mem(map[string]any{"command": "rename", "old_path": "/memories/deploy-window.md", "new_path": "/memories/deploy-days.md"}), "Renamed")
	_, err = memories.Get(ctx, "acme", scope, "deploy-window")
	require.ErrorIs(t, err, memory.ErrNotFound, "the old name is gone")
	moved, err := memories.Get(ctx, "acme", scope, "deploy-days")
	require.NoError(t, err)
	require.Contains(t, moved.Body, "before noon")
	require.Contains(t, mem(map[string]any{"command": "view", "path": "/memories/MEMORY.md"}), "(deploy-days.md)")

	require.Contains(t, mem(map[string]any{"command": "delete", "path": "/memories/deploy-days.md"}), "Deleted")
	_, err = memories.Get(ctx, "acme", scope, "deploy-days")
	require.ErrorIs(t, err, memory.ErrNotFound)

	// Another tenant's scope of the same name holds nothing of this.
	other := h.mcpClient(t, "Authorization", "Bearer key-globex", "X-Mnemos-Project", "repo-x")
	require.Contains(t, okTool(t, other, "memory", map[string]any{"command": "view", "path": "/memories"}), "0 memories")
}

func TestMCPMemoryRefusesBadInputAsToolErrors(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cs := h.mcpClient(t, "Authorization", "Bearer key-acme", "X-Mnemos-User", "u-1")
	okTool(t, cs, "memory", map[string]any{"command": "create", "path": "/memories/twice.md",
		"file_text": memoryMarkdown("twice", "A memory repeating itself", "word word")})
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"command": "view", "path": "/etc/passwd"}, "out_of_scope"},
		{map[string]any{"command": "view", "path": "/memories/../secrets.md"}, "out_of_scope"},
		{map[string]any{"command": "view", "path": "/memories/sub/x.md"}, "out_of_scope"},
		{map[string]any{"command": "view", "path": "/memories/a\x00.md"}, "bad_name"},
		{map[string]any{"command": "view", "path": "/memories/missing.md"}, "Not found"},
		{map[string]any{"command": "create", "path": "/memories/plain.md", "file_text": "no frontmatter"}, "Refused"},
		{map[string]any{"command": "create", "path": "/memories/other.md", "file_text": memoryMarkdown("twice", "d", "b")}, "name_mismatch"},
		{map[string]any{"command": "str_replace", "path": "/memories/twice.md", "old_str": "word", "new_str": "x"}, "occurs 2 times"},
		{map[string]any{"command": "insert", "path": "/memories/twice.md", "insert_line": 99, "insert_text": "x"}, "insert_line 99"},
		{map[string]any{"command": "delete", "path": "/memories/MEMORY.md"}, "cannot be deleted"},
		{map[string]any{"command": "rename", "old_path": "/memories/twice.md", "new_path": "/tmp/twice.md"}, "out_of_scope"},
		{map[string]any{"command": "chmod", "path": "/memories/twice.md"}, "unknown command"},
	} {
		text, isErr := callTool(t, cs, "memory", c.args)
		require.True(t, isErr, "%v: %s", c.args, text)
		require.Contains(t, text, c.want, "%v", c.args)
	}
	noScope := h.mcpClient(t, "Authorization", "Bearer key-acme")
	text, isErr := callTool(t, noScope, "memory", map[string]any{"command": "view", "path": "/memories"})
	require.True(t, isErr)
	require.Contains(t, text, "X-Mnemos-Project")
}

// accountant applies turn events as the token-accounting target does.
func (h *harness) accountant(t *testing.T) *tokenaccounting.Service {
	t.Helper()
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), h.store.TenantSettings, time.Minute)
	require.NoError(t, err)
	acc, err := tokenaccounting.New(tokenaccounting.DefaultConfig(), h.store, h.bus, settings, bustest.Logger(t), nil)
	require.NoError(t, err)
	return acc
}

// round is one API round of session: the user's text (after the previous
// round's tool result, when result is not empty) and a response calling Bash.
func round(tenant, session string, seq int64, text, result string) turn.Event {
	user := turn.Content{{Type: turn.BlockText, Text: text}}
	if result != "" {
		c := turn.Content{{Type: turn.BlockText, Text: result}}
		user = append(turn.Content{{Type: turn.BlockToolResult, ToolUseID: fmt.Sprintf("%s-call-%d", session, seq-1), Content: &c}}, user...)
	}
	return turn.Event{
		Schema: turn.SchemaV1, EventID: fmt.Sprintf("%s-e%d", session, seq), TenantID: tenant, SessionID: session, Seq: seq,
		Model: "claude-sonnet-4-5", OccurredAt: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).Add(time.Duration(seq) * time.Minute),
		MemoryScope:   map[string]string{"project": "repo-x"},
		InputMessages: []turn.Message{{UUID: fmt.Sprintf("%s-u%d", session, seq), Role: "user", Content: user}},
		Response: &turn.Message{UUID: fmt.Sprintf("%s-a%d", session, seq), Role: "assistant", StopReason: "tool_use", Content: turn.Content{
			{Type: turn.BlockText, Text: "Running it."},
			{Type: turn.BlockToolUse, ID: fmt.Sprintf("%s-call-%d", session, seq), Name: "Bash", Input: []byte(`{"command":"make"}`)},
		}},
		Usage: &turn.Usage{InputTokens: 100 * seq, OutputTokens: 10},
	}
}

var toolResultID = regexp.MustCompile(`stored as tool result ([A-Za-z0-9_-]+)`)

// offloaded has acc apply two rounds of acme's session s1, the second
// with output as the tool result, large enough to be offloaded, and
// returns the id the preview names.
func (h *harness) offloaded(t *testing.T, acc *tokenaccounting.Service, output string) string {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, acc.Apply(ctx, round("acme", "s1", 1, "run the build", "")))
	require.NoError(t, acc.Apply(ctx, round("acme", "s1", 2, "what did it say?", output)))
	var stored string
	require.NoError(t, h.store.InTx(ctx, "acme", func(tx *store.Tx) error {
		msgs, err := tx.Messages(ctx, "s1")
		for _, m := range msgs {
			stored += string(m.Content)
		}
		return err
	}))
	m := toolResultID.FindStringSubmatch(stored)
	require.NotNil(t, m, "the accountant offloaded the large result and its preview names it")
	return m[1]
}

func TestMCPReadsAnOffloadedToolResult(t *testing.T) {
	t.Parallel()
	h := setup(t)
	id := h.offloaded(t, h.accountant(t), strings.Repeat("0123456789", 6_000)+"THE END é")

	cs := h.mcpClient(t, "X-Api-Key", "key-acme")
	text := okTool(t, cs, "read_tool_result", map[string]any{"id": id, "offset": 60_000, "limit": 100})
	require.True(t, strings.HasSuffix(text, "\n\nTHE END é"), text)
	require.Contains(t, text, "characters 60000 to 60009 of 60009", "offset and limit count characters")
	text = okTool(t, cs, "read_tool_result", map[string]any{"id": id, "limit": 10})
	require.True(t, strings.HasSuffix(text, "\n\n0123456789"), text)
	require.Contains(t, text, "read on with offset 10")

	other := h.mcpClient(t, "X-Api-Key", "key-globex")
	text, isErr := callTool(t, other, "read_tool_result", map[string]any{"id": id})
	require.True(t, isErr)
	require.Equal(t, "no tool result "+id, text, "another tenant's id is not found")
	text, isErr = callTool(t, cs, "read_tool_result", map[string]any{"id": "../x"})
	require.True(t, isErr, text)
	text, isErr = callTool(t, cs, "read_tool_result", map[string]any{"id": id, "offset": 70_000})
	require.True(t, isErr, text)
}

func TestMCPSearchesPastTheCompaction(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	acc := h.accountant(t)
	require.NoError(t, acc.Apply(ctx, round("acme", "s1", 1, "the flaky test is TestQuokkaMigration", "")))
	for seq := int64(2); seq <= 4; seq++ {
		require.NoError(t, acc.Apply(ctx, round("acme", "s1", seq, fmt.Sprintf("step %d", seq), "ok")))
	}
	require.NoError(t, acc.Apply(ctx, round("globex", "s1", 1, "TestQuokkaMigration of another tenant", "")))
	require.NoError(t, acc.Apply(ctx, round("acme", "s2", 1, "TestQuokkaMigration in another session", "")))

	// A real compaction summarizes the first messages away.
	status, body := h.do(t, "POST", "/v1/sessions/s1/compact", "key-acme", []byte(`{"wait": false}`))
	require.Equal(t, http.StatusAccepted, status, body)
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), h.store.TenantSettings, time.Minute)
	require.NoError(t, err)
	comp, err := compactor.New(compactor.DefaultConfig(), h.store, h.bus, settings,
		builtin.New(map[llm.Task]builtin.Handler{llm.TaskCompaction: compaction.BuiltinSummarizer}), bustest.Logger(t), nil)
	require.NoError(t, err)
	id := body["id"].(string)
	require.NoError(t, comp.Compact(ctx, "acme", "s1", id, nil))
	status, body = h.do(t, "GET", "/v1/compactions/"+id, "key-acme", nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "completed", body["status"], body)

	// The scope is the session's (project:repo-x): every session of it
	// is searched, this tenant's only.
	cs := h.mcpClient(t, "Authorization", "Bearer key-acme", "X-Claude-Code-Session-Id", "s1")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_past_context", Arguments: map[string]any{"query": "which test was flaky? TestQuokkaMigration"}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	text := res.Content[0].(*mcp.TextContent).Text
	require.Contains(t, text, "2 hits in scope project:repo-x")
	require.Contains(t, text, "- session s1, position 0 (user, ")
	require.Contains(t, text, "«flaky» «test» is «TestQuokkaMigration»")
	require.NotContains(t, text, "of another tenant")
	var found api.SearchResult
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &found))
	require.Equal(t, "project:repo-x", found.Scope)
	require.Len(t, found.Hits, 2)
	require.Equal(t, "s1", found.Hits[0].Session, "the message with both words first")
	require.Equal(t, int64(0), *found.Hits[0].Position)
	require.Equal(t, "s2", found.Hits[1].Session)

	text = okTool(t, cs, "search_past_context", map[string]any{"query": "TestQuokkaMigration", "session": "s2"})
	require.Contains(t, text, "1 hits in session s2 of scope project:repo-x")
	require.Contains(t, okTool(t, cs, "search_past_context", map[string]any{"query": "nothing-like-this"}), "Nothing in scope project:repo-x matches")
	require.Contains(t, okTool(t, cs, "search_past_context", map[string]any{"query": "TestQuokkaMigration", "scope": "project:elsewhere"}), "Nothing in scope project:elsewhere")

	text, isErr := callTool(t, cs, "search_past_context", map[string]any{"query": "  "})
	require.True(t, isErr, text)
	text, isErr = callTool(t, cs, "search_past_context", map[string]any{"query": "x", "scope": "galaxy:far"})
	require.True(t, isErr, text)
	require.Contains(t, text, "scope")
	noScope := h.mcpClient(t, "Authorization", "Bearer key-acme")
	text, isErr = callTool(t, noScope, "search_past_context", map[string]any{"query": "TestQuokkaMigration"})
	require.True(t, isErr)
	require.Contains(t, text, "X-Mnemos-Project")
	// The headers' scope serves without a session.
	byHeader := h.mcpClient(t, "Authorization", "Bearer key-acme", "X-Mnemos-Project", "repo-x")
	require.Contains(t, okTool(t, byHeader, "search_past_context", map[string]any{"query": "TestQuokkaMigration"}), "2 hits")
}

func TestMCPRecall(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.withRecall(t, recall.Builtin)
	cs := h.mcpClient(t, "Authorization", "Bearer key-acme", "X-Mnemos-Project", "repo-x", "X-Mnemos-Session", "s1")
	okTool(t, cs, "memory", map[string]any{"command": "create", "path": "/memories/staging-db-read-only-fridays.md",
		"file_text": memoryMarkdown("staging-db-read-only-fridays", "The staging database is read-only on Fridays", "Wait for Monday.")})
	text := okTool(t, cs, "recall", map[string]any{"query": "can you run the migration on the staging database?", "recent_tools": []string{"Bash"}})
	require.True(t, strings.HasPrefix(text, "<system-reminder>"), text)
	require.Contains(t, text, "Wait for Monday.")
	require.Contains(t, okTool(t, cs, "recall", map[string]any{"query": "can you run the migration on the staging database?"}), "No memory to show",
		"a memory is shown once per session")
	text, isErr := callTool(t, cs, "recall", map[string]any{"query": ""})
	require.True(t, isErr, text)
}
