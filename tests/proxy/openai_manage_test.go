package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	scripted "github.com/mnemos-ai/mnemos/internal/testkit/llmtest/responses"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway"
	"github.com/mnemos-ai/mnemos/services/recallprefetch"
)

// responsesAgent is an agent of the Responses API through Mnemos, its
// requests written by hand so that the test holds every byte it sent: the
// instructions its input opens with, then the conversation, each item as
// the client wrote it or, for the answer's items, as the client got them.
type responsesAgent struct {
	t            *testing.T
	m            *mnemos
	up           *scripted.Upstream
	session      string
	header       map[string]string
	instructions []json.RawMessage
	input        []json.RawMessage
	bodies       [][]byte
	rounds       int64
}

// startResponsesAgent runs Mnemos, under the tenant settings given (none
// when ""), in front of a scripted Responses API, with an agent of session.
func startResponsesAgent(t *testing.T, session, settings string, script scripted.Script, extras ...extra) *responsesAgent {
	t.Helper()
	return startResponsesAgentOn(t, bustest.New(t), session, settings, script, extras...)
}

// startResponsesAgentOn is startResponsesAgent on the bus given.
func startResponsesAgentOn(t *testing.T, b *bus.Bus, session, settings string, script scripted.Script, extras ...extra) *responsesAgent {
	t.Helper()
	ctx := context.Background()
	up := scripted.Start(t, scripted.Config{Script: script})
	m := startMnemosOn(t, pgtest.New(t), b, "http://127.0.0.1:1", key, extras...)
	require.NoError(t, m.store.SetTenantUpstream(ctx, tenant, store.ProviderOpenAI, store.Upstream{URL: strings.TrimSuffix(up.URL, "/v1"), Key: "sk-acme-openai"}))
	if settings != "" {
		require.NoError(t, m.store.SetTenantSettings(ctx, tenant, []byte(settings)))
	}
	return &responsesAgent{t: t, m: m, up: up, session: session, header: map[string]string{}}
}

// send sends the conversation so far and items after it, keeps the
// answer's output items as the client got them, waits until Mnemos
// applied the round, and answers the output items.
func (a *responsesAgent) send(items ...json.RawMessage) []json.RawMessage {
	a.t.Helper()
	a.input = append(a.input, items...)
	all := append(append([]json.RawMessage(nil), a.instructions...), a.input...)
	body := []byte(`{"model": "gpt-5", "store": false, "input": ` + jsonArray(all) + `}`)
	var answer struct {
		Output []json.RawMessage `json:"output"`
	}
	postOpenAI(a.t, a.m, "/v1/responses", a.session, a.header, body, &answer)
	a.bodies = append(a.bodies, body)
	a.input = append(a.input, answer.Output...)
	a.rounds++
	waitApplied(a.t, a.m.store, a.session, a.rounds)
	return answer.Output
}

// jsonArray is items as a JSON array, each as it is.
func jsonArray(items []json.RawMessage) string {
	out := make([][]byte, len(items))
	for i, it := range items {
		out[i] = it
	}
	return "[" + string(bytes.Join(out, []byte(", "))) + "]"
}

// postOpenAI posts body to one of Mnemos's OpenAI routes for session, with
// the tenant's key and the headers given, and decodes its answer, which
// must be 200, into answer.
func postOpenAI(t *testing.T, m *mnemos, path, session string, header map[string]string, body []byte, answer any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, m.api.URL+path, bytes.NewReader(body))
	require.NoError(t, err)
	all := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json", "X-Mnemos-Session": session}
	maps.Copy(all, header)
	for k, v := range all {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(answer))
}

// The client's own items, written its own way: keys in an order of its
// own, not the one Mnemos renders an item in. (The proxy sends JSON
// compacted, as json.Marshal does: whitespace between tokens is not a
// client's to keep, and OpenAI reads the items, not their spacing.)
func userItem(text string) json.RawMessage {
	return json.RawMessage(`{"role":"user","type":"message","content":[{"text":` + jsonString(text) + `,"type":"input_text"}]}`)
}

func developerItem(text string) json.RawMessage {
	return json.RawMessage(`{"role":"developer","type":"message","content":[{"text":` + jsonString(text) + `,"type":"input_text"}]}`)
}

func outputItem(callID, output string) json.RawMessage {
	return json.RawMessage(`{"output":` + jsonString(output) + `,"call_id":` + jsonString(callID) + `,"type":"function_call_output"}`)
}

func jsonString(s string) string {
	out, err := json.Marshal(s)
	if err != nil {
		panic(err) // a string
	}
	return string(out)
}

// callID is the call_id of the function call among outputs.
func callID(t *testing.T, outputs []json.RawMessage) string {
	t.Helper()
	for _, raw := range outputs {
		var it struct{ Type, CallID string }
		require.NoError(t, json.Unmarshal(raw, &struct {
			Type   *string `json:"type"`
			CallID *string `json:"call_id"`
		}{&it.Type, &it.CallID}))
		if it.Type == "function_call" {
			return it.CallID
		}
	}
	t.Fatalf("no function_call among %s", outputs)
	return ""
}

// callEvery is a script whose model calls tool every round until the
// client has sent calls outputs, then answers done; a user's message
// after that is answered done too.
func callEvery(tool string, calls int) scripted.Script {
	return func(r *scripted.Request) (scripted.Reply, error) {
		if r.Outputs() < calls && r.Items[len(r.Items)-1].Type != "message" || r.Outputs() == 0 {
			return scripted.Say(scripted.Reasoning("run it"), scripted.FunctionCall(tool, map[string]string{"cmd": "make test"})), nil
		}
		return scripted.Say(scripted.Text("done")), nil
	}
}

// sentItem is an item of the input the upstream got: the client's item
// at position from (of its input, its instructions first), as its own
// bytes (same) or rewritten by Mnemos; or an item Mnemos added (from -1).
type sentItem struct {
	raw  json.RawMessage
	from int
	same bool
}

// upstreamInput holds the body the upstream got against the one the
// client sent: every field but the input the same JSON, and each of the
// client's items, in order, either its own bytes or (a function call's
// output only: a preview, a cleared result) an item of the same call
// rewritten; whatever else is in the input Mnemos added. It answers the
// upstream's input, item by item.
func upstreamInput(t *testing.T, client, upstream []byte) []sentItem {
	t.Helper()
	return upstreamConversation(t, "input", client, upstream)
}

// upstreamConversation is upstreamInput for the conversation in field
// ("messages" for Chat Completions, whose tool messages are the outputs).
func upstreamConversation(t *testing.T, field string, client, upstream []byte) []sentItem {
	t.Helper()
	var c, u map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(client, &c))
	require.NoError(t, json.Unmarshal(upstream, &u))
	var ci, ui []json.RawMessage
	require.NoError(t, json.Unmarshal(c[field], &ci))
	require.NoError(t, json.Unmarshal(u[field], &ui))
	clientInput, upstreamInput := c[field], u[field]
	delete(c, field)
	delete(u, field)
	cf, err := json.Marshal(c)
	require.NoError(t, err)
	uf, err := json.Marshal(u)
	require.NoError(t, err)
	require.JSONEq(t, string(cf), string(uf), "every field but the input goes up as sent")

	var out []sentItem
	i := 0
	for _, raw := range ui {
		switch {
		case i < len(ci) && bytes.Equal(raw, ci[i]):
			out = append(out, sentItem{raw: raw, from: i, same: true})
			i++
		case i < len(ci) && sameOutput(ci[i], raw):
			out = append(out, sentItem{raw: raw, from: i})
			i++
		default:
			out = append(out, sentItem{raw: raw, from: -1})
		}
	}
	require.Equal(t, len(ci), i, "every item of the client's reaches the upstream, in order:\nclient %s\nupstream %s", clientInput, upstreamInput)
	return out
}

// sameOutput reports whether b is a function call's output a stands for:
// both outputs of the same call (function_call_output items, or Chat's
// tool messages).
func sameOutput(a, b json.RawMessage) bool {
	type output struct {
		Type       string `json:"type"`
		Role       string `json:"role"`
		CallID     string `json:"call_id"`
		ToolCallID string `json:"tool_call_id"`
	}
	var x, y output
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil &&
		(x.Type == "function_call_output" || x.Role == "tool") && x == y
}

// outputOf is the output string of a function_call_output item, or the
// content of a Chat tool message.
func outputOf(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var it struct {
		Output  string `json:"output"`
		Content string `json:"content"`
	}
	require.NoError(t, json.Unmarshal(raw, &it), "%s", raw)
	return it.Output + it.Content
}

// rewritten are the client's items Mnemos rewrote in a request, by their
// position in the client's input; added the items it added.
func rewritten(items []sentItem) (changed map[int]json.RawMessage, added []sentItem) {
	changed = map[int]json.RawMessage{}
	for _, it := range items {
		switch {
		case it.from < 0:
			added = append(added, it)
		case !it.same:
			changed[it.from] = it.raw
		}
	}
	return changed, added
}

// requireReasoningKept checks that the request's reasoning items, their
// encrypted content included, are among the items that went up as sent.
func requireReasoningKept(t *testing.T, items []sentItem) {
	t.Helper()
	n := 0
	for _, it := range items {
		if bytes.Contains(it.raw, []byte(`"type":"reasoning"`)) {
			require.True(t, it.same, "a reasoning item goes up as the client's bytes: %s", it.raw)
			require.Contains(t, string(it.raw), `"encrypted_content":"enc:`)
			n++
		}
	}
	require.Positive(t, n, "the premise: the request carries reasoning")
}

// mcpSession connects the MCP go-sdk's client to Mnemos's /mcp with the
// tenant's key.
func mcpSession(t *testing.T, m *mnemos) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "mnemos-openai-test", Version: "1"}, nil)
	hdr := http.Header{"Authorization": {"Bearer " + key}}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: m.api.URL + "/mcp", HTTPClient: &http.Client{Transport: withHeader{hdr}},
	}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// withHeader adds its headers to every request.
type withHeader struct{ header http.Header }

func (w withHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	maps.Copy(r.Header, w.header)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpText calls an MCP tool that must succeed and answers its text.
func mcpText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	var texts []string
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		require.True(t, ok, "%s answers text", name)
		texts = append(texts, tc.Text)
	}
	require.False(t, res.IsError, "%s: %s", name, strings.Join(texts, "\n"))
	return strings.Join(texts, "\n")
}

// storedAs finds the id of the tool result a preview names.
var storedAs = regexp.MustCompile(`stored as tool result ([A-Za-z0-9_-]+) `)

// offloadSmall are tenant settings that offload an output of over 6,000
// characters, keeping a preview of 1,000 bytes.
const offloadSmall = `{"offload": {"threshold_chars": 6000, "preview_bytes": 1000, "turn_cap_chars": 200000}}`

// testLog is a test run's log of about 9,000 characters, over
// offloadSmall's threshold, ending in LOG-END-MARK.
func testLog() string {
	var log strings.Builder
	for i := range 400 {
		fmt.Fprintf(&log, "ok  \tpkg/mod%03d\t0.%03ds\n", i, i)
	}
	log.WriteString("PASS LOG-END-MARK\n")
	return log.String()
}

// previewOf checks that an output is testLog's preview, not the log, and
// answers the id of the stored result it names.
func previewOf(t *testing.T, output string) string {
	t.Helper()
	require.Contains(t, output, "<persisted-output>", "the output's preview")
	require.Less(t, len(output), 2000)
	require.NotContains(t, output, "LOG-END-MARK")
	p := storedAs.FindStringSubmatch(output)
	require.NotNil(t, p, output)
	return p[1]
}

// TestTheResponsesDoorOffloadsALargeOutput: a function call's output over
// the tenant's offload threshold goes up as the client sent it in the
// request that brings it, and as its preview in every request after its
// round was applied; its whole text is read back with MCP's
// read_tool_result by the id the preview names. Every other item, the
// reasoning with its encrypted content included, reaches the upstream as
// the client's own bytes, in order.
func TestTheResponsesDoorOffloadsALargeOutput(t *testing.T) {
	t.Parallel()
	const session = "responses-offload"
	a := startResponsesAgent(t, session, offloadSmall, callEvery("exec_command", 2))
	big := testLog()

	first := a.send(userItem("Run the tests and tell me whether they pass."))
	second := a.send(outputItem(callID(t, first), big))
	a.send(outputItem(callID(t, second), "ok"))
	a.send(userItem("Thanks. Anything else failing?"))
	const bigAt = 3 // the output's position in the client's input: after the question, the reasoning and the call

	calls := a.up.Calls()
	require.Len(t, calls, 4)
	var id string
	for n, c := range calls {
		items := upstreamInput(t, a.bodies[n], c.Body)
		changed, added := rewritten(items)
		require.Empty(t, added, "request %d: nothing to add without a memory scope", n+1)
		if n < 2 {
			require.Empty(t, changed, "request %d: the output's round is not applied yet, so it goes up as sent", n+1)
			continue
		}
		requireReasoningKept(t, items)
		require.Len(t, changed, 1, "request %d: the large output alone is rewritten", n+1)
		p := previewOf(t, outputOf(t, changed[bigAt]))
		if id == "" {
			id = p
		}
		require.Equal(t, id, p, "every request names the same stored result")
	}

	read := mcpText(t, mcpSession(t, a.m), "read_tool_result", map[string]any{"id": id, "limit": 100_000})
	require.Contains(t, read, big, "read_tool_result answers the output whole")
}

// openaiMicro are tenant settings that micro-compact small OpenAI
// sessions: smallMicro's thresholds, with the Codex CLI's tool among the
// tools whose outputs may be cleared (the default set names Claude
// Code's).
const openaiMicro = `{
	"tokens": {"auto_compact_percent": 5, "warning_buffer": 3000, "error_buffer": 500},
	"micro": {"tools": ["exec_command"], "size_keep": 1, "size_min_saving": 1000}}`

// TestTheResponsesDoorMicroCompacts: under the tenant's micro-compaction
// policy, the output that takes the session past its warning threshold
// has the old output cleared in the request that carries it, as for the
// Messages door (TestTheClientsNewMessagesCountForMicroCompaction); the
// latest output is kept, and every other item goes up as the client's own
// bytes.
func TestTheResponsesDoorMicroCompacts(t *testing.T) {
	t.Parallel()
	const session = "responses-micro"
	a := startResponsesAgent(t, session, openaiMicro, callEvery("exec_command", 10))
	st := a.m.store

	out := a.send(userItem("Run the tests until they pass."))
	out = a.send(outputItem(callID(t, out), strings.Repeat("ok  \tpkg/a\t0.1s\n", 300))) // about 1,200 tokens: the output to clear
	out = a.send(outputItem(callID(t, out), "FAIL pkg/b"))
	sess := waitApplied(t, st, session, 3)
	warning := thresholds(t, a.m.api.URL, key, session).Warning
	require.Less(t, sess.TokenCount, warning, "the premise: the stored session is under its warning threshold")
	for n, c := range a.up.Calls() {
		changed, _ := rewritten(upstreamInput(t, a.bodies[n], c.Body))
		require.Empty(t, changed, "request %d: nothing cleared under the warning threshold", n+1)
	}

	// This output takes the call past the warning threshold and stays
	// under the auto-compaction threshold (3,000 tokens above it).
	line := "--- FAIL: TestB (0.00s)\n    b_test.go:12: want 3, got 4\n"
	big := line
	for sess.TokenCount+tokens.EstimateContent(turn.Content{{Type: turn.BlockText, Text: big}}) < warning+1000 {
		big += line
	}
	a.send(outputItem(callID(t, out), big))

	calls := a.up.Calls()
	items := upstreamInput(t, a.bodies[3], calls[3].Body)
	requireReasoningKept(t, items)
	changed, added := rewritten(items)
	require.Empty(t, added)
	require.Len(t, changed, 1, "the first output alone is cleared, in the call that crosses the warning threshold")
	require.Equal(t, assembly.ClearedText, outputOf(t, changed[3]), "the output after the question, the reasoning and the call")
	require.Zero(t, compactionsBeforeTheCall(t, st, session), "the call stayed under the auto-compaction threshold")
}

// withRecall runs recall beside Mnemos: the API's route, MCP's tool and
// the prefetch on ingest, its selector the builtin one (lexical).
func withRecall(t *testing.T, st *store.Store, b *bus.Bus, settings *tenantcfg.Cache, gcfg *gateway.Config) func(context.Context) error {
	memories, err := memory.NewStore(st, nil, memory.Options{})
	require.NoError(t, err)
	recaller, err := recall.New(st, memories, builtin.New(map[llm.Task]builtin.Handler{llm.TaskRecall: recall.Builtin}),
		func(ctx context.Context, tenant string) (recall.Settings, error) {
			set, err := settings.For(ctx, tenant)
			return set.Recall, err
		}, nil, recall.Options{})
	require.NoError(t, err)
	gcfg.Memories, gcfg.Recall = memories, recaller
	prefetch, err := recallprefetch.New(recallprefetch.DefaultConfig(), b, recaller, bustest.Logger(t))
	require.NoError(t, err)
	return prefetch.Run
}

// putMemory saves a memory of scope through the API.
func putMemory(t *testing.T, m *mnemos, scope, name, description, body string) {
	t.Helper()
	md := fmt.Sprintf("---\nname: %s\ndescription: %s\ntype: project\n---\n\n%s\n", name, description, body)
	req, err := http.NewRequest(http.MethodPut, m.api.URL+"/v1/scopes/"+scope+"/memories/"+name, strings.NewReader(md))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "text/markdown")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
}

// TestTheResponsesDoorSendsTheMemorySection: a session that names a
// memory scope (X-Mnemos-Project) gets the scope's memory section as a
// developer message item right after the client's instructions items,
// and a memory recalled for the user's message as an item right after
// that message, from the first request that finds the session stored;
// the client's items all go up as its own bytes, in order.
func TestTheResponsesDoorSendsTheMemorySection(t *testing.T) {
	t.Parallel()
	const session, scope = "responses-memory", "project:harbour"
	a := startResponsesAgent(t, session, "", callEvery("exec_command", 1), withRecall)
	putMemory(t, a.m, scope, "staging-db-read-only-fridays", "The staging database is read-only on Fridays",
		"Migrations on staging wait until Monday: the replica sync runs on Fridays.")
	a.header["X-Mnemos-Project"] = "harbour"
	a.instructions = []json.RawMessage{
		json.RawMessage(`{"type":"message","role":"system","content":"You are a careful release engineer."}`),
		developerItem("Run commands with exec_command; keep answers short."),
	}

	out := a.send(userItem("Can you run the migration on the staging database?"))
	a.send(outputItem(callID(t, out), "migrated 3 tables"))
	a.send(userItem("Thanks. What else is left?"))

	calls := a.up.Calls()
	require.Len(t, calls, 3)
	_, added := rewritten(upstreamInput(t, a.bodies[0], calls[0].Body))
	require.Empty(t, added, "the first request finds nothing stored: it goes up as sent")
	for n := 1; n < len(calls); n++ {
		items := upstreamInput(t, a.bodies[n], calls[n].Body)
		changed, added := rewritten(items)
		require.Empty(t, changed, "request %d: no item of the client's is rewritten", n+1)
		require.Len(t, added, 2, "request %d: the memory section and the recalled memory", n+1)

		section := items[len(a.instructions)]
		require.Equal(t, -1, section.from, "request %d: the section follows the client's instructions items", n+1)
		var dev struct {
			Type, Role string
			Content    []struct{ Type, Text string }
		}
		require.NoError(t, json.Unmarshal(section.raw, &dev))
		require.Equal(t, "message", dev.Type)
		require.Equal(t, "developer", dev.Role)
		require.Len(t, dev.Content, 1)
		require.Equal(t, "input_text", dev.Content[0].Type)
		require.Contains(t, dev.Content[0].Text, "staging-db-read-only-fridays", "the section indexes the scope's memories")

		user := len(a.instructions) + 1 // the client's first user message, after the section
		require.Equal(t, len(a.instructions), items[user].from)
		recalled := items[user+1]
		require.Equal(t, -1, recalled.from, "request %d: the recalled memory is beside the user's message", n+1)
		require.Contains(t, string(recalled.raw), "A saved memory that may help here: "+scope+"/staging-db-read-only-fridays.md")
		require.Contains(t, string(recalled.raw), "Migrations on staging wait until Monday")
	}
}

// turnEvents keeps the turn events published for a session.
type turnEvents struct {
	mu     sync.Mutex
	events []turn.Event
}

// watchTurns subscribes to the turn events of session on b.
func watchTurns(t *testing.T, b *bus.Bus, session string) *turnEvents {
	t.Helper()
	te := &turnEvents{}
	sub, err := b.Conn().Subscribe(b.Subject(bus.KindTurnCompleted, tenant, session), func(m *nats.Msg) {
		var ev turn.Event
		if json.Unmarshal(m.Data, &ev) != nil {
			return
		}
		te.mu.Lock()
		defer te.mu.Unlock()
		te.events = append(te.events, ev)
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return te
}

func (te *turnEvents) all() []turn.Event {
	te.mu.Lock()
	defer te.mu.Unlock()
	return append([]turn.Event(nil), te.events...)
}

// TestTheResponsesDoorRecordsTheRound: every round through the Responses
// door is recorded as a turn event of the session, its seq the round's,
// with the client's new items as turns and the answer, and the usage the
// upstream answered: input_tokens less the cached ones as input,
// cached_tokens as cache reads, output_tokens as output. The session's
// count (GET /v1/sessions/{id}) is the last round's input and output.
func TestTheResponsesDoorRecordsTheRound(t *testing.T) {
	t.Parallel()
	const session = "responses-usage"
	b := bustest.New(t)
	watched := watchTurns(t, b, session)
	a := startResponsesAgentOn(t, b, session, "", callEvery("exec_command", 2))
	// Instructions long enough for the prompt cache (1,024 tokens).
	a.instructions = []json.RawMessage{developerItem(strings.Repeat("Keep every change small and tested. ", 200))}

	out := a.send(userItem("Run the tests."))
	out = a.send(outputItem(callID(t, out), "FAIL pkg/b"))
	a.send(outputItem(callID(t, out), "ok pkg/b"))

	calls := a.up.Calls()
	require.Len(t, calls, 3)
	require.Positive(t, calls[2].Usage.Cached, "the premise: the upstream read a prefix from its cache")
	var events []turn.Event
	require.Eventually(t, func() bool { events = watched.all(); return len(events) >= 3 }, 10*time.Second, 20*time.Millisecond)
	require.Len(t, events, 3)
	for n, ev := range events {
		u := calls[n].Usage
		require.EqualValues(t, n+1, ev.Seq)
		require.Equal(t, "gpt-5", ev.Model)
		require.Equal(t, turn.Usage{InputTokens: u.Input - u.Cached, CacheReadInputTokens: u.Cached, OutputTokens: u.Output}, *ev.Usage, "round %d", n+1)
		require.Len(t, ev.InputMessages, 1, "round %d: the client's new message", n+1)
		require.NotNil(t, ev.Response)
		require.Equal(t, "assistant", ev.Response.Role)
	}
	require.Equal(t, "user", events[0].InputMessages[0].Role)
	require.Equal(t, turn.BlockToolResult, events[1].InputMessages[0].Content[0].Type)

	last := calls[2].Usage
	require.Equal(t, last.Input+last.Output, thresholds(t, a.m.api.URL, key, session).Count,
		"the session's count is the last round's input, cached included, and output")
	sess := waitApplied(t, a.m.store, session, 3)
	require.EqualValues(t, 6, sess.MessageCount)
}

// TestTheChatDoorOffloadsALargeOutput: the same through Chat Completions:
// a tool message over the offload threshold goes up as sent in the
// request that brings it and as its preview in the requests after its
// round was applied, which MCP's read_tool_result reads whole; every
// other message, the client's system message first, goes up as the
// client's own bytes, in order.
func TestTheChatDoorOffloadsALargeOutput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const session = "chat-offload"
	up := llmtest.NewOpenAIServer(t, func(r llmtest.Request) llmtest.Reply {
		outputs := 0
		for _, m := range r.Messages {
			if m.Role == "tool" {
				outputs++
			}
		}
		if last := r.Messages[len(r.Messages)-1].Role; outputs == 0 || last == "tool" && outputs < 2 {
			return llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call_%d", outputs+1), Name: "exec_command", Input: json.RawMessage(`{"cmd":"make test"}`)}}}
		}
		return llmtest.Text("done")
	})
	m := startMnemos(t, "http://127.0.0.1:1", key)
	require.NoError(t, m.store.SetTenantUpstream(ctx, tenant, store.ProviderOpenAI, store.Upstream{URL: strings.TrimSuffix(up.URL, "/v1"), Key: "sk-acme-openai"}))
	require.NoError(t, m.store.SetTenantSettings(ctx, tenant, []byte(offloadSmall)))
	msgs := []json.RawMessage{json.RawMessage(`{"content":"Run commands with exec_command.","role":"system"}`)}
	var bodies [][]byte
	send := func(next json.RawMessage) string {
		msgs = append(msgs, next)
		body := []byte(`{"model": "gpt-5", "messages": ` + jsonArray(msgs) + `}`)
		var answer struct {
			Choices []struct {
				Message json.RawMessage `json:"message"`
			} `json:"choices"`
		}
		postOpenAI(t, m, "/v1/chat/completions", session, nil, body, &answer)
		require.Len(t, answer.Choices, 1)
		bodies = append(bodies, body)
		msgs = append(msgs, answer.Choices[0].Message)
		waitApplied(t, m.store, session, int64(len(bodies)))
		var call struct {
			ToolCalls []struct{ ID string } `json:"tool_calls"`
		}
		require.NoError(t, json.Unmarshal(answer.Choices[0].Message, &call))
		if len(call.ToolCalls) == 0 {
			return ""
		}
		return call.ToolCalls[0].ID
	}
	tool := func(id, content string) json.RawMessage {
		return json.RawMessage(`{"tool_call_id":` + jsonString(id) + `,"role":"tool","content":` + jsonString(content) + `}`)
	}
	big := testLog()

	id := send(json.RawMessage(`{"role":"user","content":"Run the tests and tell me whether they pass."}`))
	id = send(tool(id, big))
	send(tool(id, "ok"))
	send(json.RawMessage(`{"role":"user","content":"Thanks. Anything else failing?"}`))
	const bigAt = 3 // after the system message, the question and the call

	reqs := up.Requests()
	require.Len(t, reqs, 4)
	var stored string
	for n, r := range reqs {
		changed, added := rewritten(upstreamConversation(t, "messages", bodies[n], r.Body))
		require.Empty(t, added, "request %d", n+1)
		if n < 2 {
			require.Empty(t, changed, "request %d: the output's round is not applied yet, so it goes up as sent", n+1)
			continue
		}
		require.Len(t, changed, 1, "request %d: the large output alone is rewritten", n+1)
		stored = previewOf(t, outputOf(t, changed[bigAt]))
	}
	read := mcpText(t, mcpSession(t, m), "read_tool_result", map[string]any{"id": stored, "limit": 100_000})
	require.Contains(t, read, big, "read_tool_result answers the output whole")
}
