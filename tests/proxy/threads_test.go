package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/llm"
)

// These tests hold Mnemos to what a drop-in proxy owes its clients: every
// request the upstream receives holds the client's conversation as the
// client sent it. The sessions stay far below every threshold, where Mnemos
// has nothing to edit, so "as sent" is exact: the same messages, compared
// request by request as canonical JSON (cache_control dropped, keys
// ordered), and each thread Mnemos stored is the client's conversation.

// requestHeader tags each request a test sends: an anthropic- header, which
// the proxy passes up, so the upstream's copy is found by it.
const requestHeader = "Anthropic-Test-Request"

// echoScript is an upstream script whose answers differ from conversation to
// conversation and from round to round.
func echoScript(req llmtest.Request) llmtest.Reply {
	first := ""
	if len(req.Messages) > 0 {
		first = req.Messages[0].Text
	}
	return llmtest.Reply{
		Text:  fmt.Sprintf("answer %d to %.40s", len(req.Messages), first),
		Usage: llm.Usage{InputTokens: 200, OutputTokens: 8},
	}
}

// faithful is one client of a session through Mnemos, the official SDK,
// that keeps every request body it sent and checks each against the one
// the upstream received.
type faithful struct {
	t       *testing.T
	s       *system
	session string
	client  sdk.Client
	mu      sync.Mutex
	sent    map[string][]byte // body by request tag
}

func newFaithful(t *testing.T, s *system, session string) *faithful {
	f := &faithful{t: t, s: s, session: session, sent: map[string][]byte{}}
	f.client = sdk.NewClient(
		option.WithoutEnvironmentDefaults(), option.WithBaseURL(s.api.URL), option.WithAPIKey(key), option.WithMaxRetries(0),
		option.WithHeader("X-Mnemos-Session", session),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return nil, err
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			tag := r.Header.Get(requestHeader)
			f.mu.Lock()
			f.sent[tag] = body
			f.mu.Unlock()
			return next(r)
		}))
	return f
}

// requestTags numbers the requests the tests send: the tag of each is
// unique, whichever client of a session sends it.
var requestTags atomic.Int64

// readTool is a tool a conversation may offer.
var readTool = []sdk.ToolUnionParam{{OfTool: &sdk.ToolParam{
	Name: "Read", Description: sdk.String("Reads a file."),
	InputSchema: sdk.ToolInputSchemaParam{Properties: map[string]any{"file_path": map[string]any{"type": "string"}}},
}}}

// send sends msgs (with tools, when given) and checks that the upstream
// received them as sent; it returns msgs with the answer.
func (f *faithful) send(msgs []sdk.MessageParam, tools []sdk.ToolUnionParam) []sdk.MessageParam {
	f.t.Helper()
	tag := fmt.Sprintf("%s-%d", f.session, requestTags.Add(1))
	answer, err := f.client.Messages.New(context.Background(), sdk.MessageNewParams{Model: model, MaxTokens: 256, Messages: msgs, Tools: tools},
		option.WithHeader(requestHeader, tag))
	require.NoError(f.t, err)
	f.check(tag)
	return append(msgs, answer.ToParam())
}

// check compares the request tagged tag as sent and as received.
func (f *faithful) check(tag string) {
	f.t.Helper()
	f.mu.Lock()
	sent := f.sent[tag]
	f.mu.Unlock()
	require.NotNil(f.t, sent, "request %s was not sent", tag)
	var got []byte
	for _, r := range f.s.upstream.Requests() {
		if r.Header.Get(requestHeader) == tag {
			got = r.Body
		}
	}
	require.NotNil(f.t, got, "request %s did not reach the upstream", tag)
	require.Equal(f.t, canonMessages(f.t, sent), canonMessages(f.t, got), "request %s: the upstream did not receive the client's conversation", tag)
}

// canonMessages are the messages of a request body, each as canonical JSON.
func canonMessages(t *testing.T, body []byte) []string {
	t.Helper()
	var req struct {
		Messages []json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(body, &req))
	out := make([]string, len(req.Messages))
	for i, m := range req.Messages {
		out[i] = canon(t, m)
	}
	return out
}

// canon is data as canonical JSON: object keys in order, cache_control and
// null members dropped, a string content as its one text block.
func canon(t *testing.T, data []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	var clean func(v any) any
	clean = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "cache_control" || e == nil {
					delete(x, k)
					continue
				}
				x[k] = clean(e)
			}
			if s, ok := x["content"].(string); ok {
				x["content"] = []any{map[string]any{"type": "text", "text": s}}
			}
		case []any:
			for i := range x {
				x[i] = clean(x[i])
			}
		}
		return v
	}
	out, err := json.Marshal(clean(v))
	require.NoError(t, err)
	return string(out)
}

// stored waits until thread holds want, as canonical JSON, and fails
// with what it holds when it does not in time. Rounds are recorded after
// their answers: a request placed while its thread's previous record was
// still on its way may be recorded with the next one, as one turn.
func stored(t *testing.T, s *system, thread string, want []string, msgAndArgs ...any) {
	t.Helper()
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		got = threadMessages(t, s, "m.session_id = $1", thread)[thread]
		if slices.Equal(got, want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, want, got, msgAndArgs...)
}

// threadMessages are the stored messages of the sessions where holds
// (a condition on messages m, with arg as $1), by session, each as
// canonical JSON; none when they cannot be read.
func threadMessages(t *testing.T, s *system, where, arg string) map[string][]string {
	t.Helper()
	rows, err := pgtest.Admin(t, s.store).Query(context.Background(), `
		SELECT m.session_id, json_build_object('role', m.role, 'content', m.content)::text
		FROM messages m WHERE `+where+` ORDER BY m.session_id, m.position`, arg)
	if err != nil {
		return nil
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var id, m string
		if rows.Scan(&id, &m) != nil {
			return nil
		}
		out[id] = append(out[id], canon(t, []byte(m)))
	}
	if rows.Err() != nil {
		return nil
	}
	return out
}

// canonOf is msgs as canonical JSON.
func canonOf(t *testing.T, msgs []sdk.MessageParam) []string {
	t.Helper()
	out := make([]string, len(msgs))
	for i, m := range msgs {
		data, err := json.Marshal(m)
		require.NoError(t, err)
		out[i] = canon(t, data)
	}
	return out
}

// agents are the threads GET /v1/sessions/{id} lists, once it lists n.
func agents(t *testing.T, s *system, session string, n int) []api.AgentThread {
	t.Helper()
	return awaitJSON(t, s.api.URL+"/v1/sessions/"+session, key, func(st api.Session) bool {
		return len(st.Agents) >= n
	}).Agents
}

// live is the agent's live thread among threads.
func live(t *testing.T, threads []api.AgentThread, agent string) api.AgentThread {
	t.Helper()
	for _, a := range threads {
		if a.AgentID == agent && a.Live {
			return a
		}
	}
	require.Failf(t, "no live thread", "agent %s: %+v", agent, threads)
	return api.AgentThread{}
}

// rounds sends n rounds of user messages after msgs, each checked.
func (f *faithful) rounds(msgs []sdk.MessageParam, n int, say string, tools []sdk.ToolUnionParam) []sdk.MessageParam {
	f.t.Helper()
	for i := range n {
		msgs = f.send(append(msgs, userText(fmt.Sprintf("%s, step %d", say, i))), tools)
	}
	return msgs
}

// TestARewindThenGrowthIsTheClientsConversation: a client that drops its
// last rounds and goes on differently, past the number of messages the
// session stored, has its own conversation reach the upstream at every
// request, never the rounds it dropped; the branch is stored as the
// client holds it, and the rounds it dropped are kept.
func TestARewindThenGrowthIsTheClientsConversation(t *testing.T) {
	t.Parallel()
	s := setup(t, echoScript)
	f := newFaithful(t, s, "rewound")
	first := f.rounds(nil, 6, "plan A", nil)
	s.applied(t, "rewound", 6)
	msgs := f.rounds(slices.Clone(first[:4]), 6, "plan B instead", nil) // 4 + 12 messages: past the 12 stored

	threads := agents(t, s, "rewound", 2)
	branch := live(t, threads, "main")
	require.Equal(t, "branch", branch.Kind)
	require.Equal(t, "rewound", branch.Parent)
	require.EqualValues(t, 3, *branch.ForkPosition, "the fork is after the second answer")
	stored(t, s, branch.Thread, canonOf(t, msgs), "the branch is the client's conversation")
	stored(t, s, "rewound", canonOf(t, first), "what followed the fork is kept")
	require.EqualValues(t, 1, s.metrics.Sum("mnemos.proxy.requests", "outcome", "branched"))
}

// TestAClientsOwnCompactionThenGrowth: a client that compacts its history
// itself and goes on from its summary starts a new epoch of the main
// agent's thread; none of the history it replaced reaches the upstream.
func TestAClientsOwnCompactionThenGrowth(t *testing.T) {
	t.Parallel()
	s := setup(t, echoScript)
	f := newFaithful(t, s, "self-compacted")
	f.rounds(nil, 6, "the long task", nil)
	s.applied(t, "self-compacted", 6)
	summary := userText(clientSummary + " " +
		"The summary below covers the earlier portion of the conversation.\n\nSummary:\n1. The long task: six steps done.")
	msgs := f.send([]sdk.MessageParam{summary}, nil)
	msgs = f.rounds(msgs, 6, "after the summary", nil)

	threads := agents(t, s, "self-compacted", 2)
	epoch := live(t, threads, "main")
	require.Equal(t, "client_compacted", epoch.Kind)
	stored(t, s, epoch.Thread, canonOf(t, msgs))
	require.EqualValues(t, 1, s.metrics.Sum("mnemos.proxy.requests", "outcome", "client_compacted"))
	require.Zero(t, s.metrics.Sum("mnemos.proxy.requests", "outcome", "branched"))
}

// TestAResumedSessionContinuesItsThread: another client process that reads
// the history back (claude --resume, --continue) and sends it with a new
// message continues the same thread.
func TestAResumedSessionContinuesItsThread(t *testing.T) {
	t.Parallel()
	s := setup(t, echoScript)
	msgs := newFaithful(t, s, "resumed").rounds(nil, 3, "before the restart", nil)
	s.applied(t, "resumed", 3)
	again := newFaithful(t, s, "resumed")
	msgs = again.rounds(msgs, 2, "after the restart", nil)

	threads := agents(t, s, "resumed", 1)
	require.Len(t, threads, 1, "one thread: %+v", threads)
	stored(t, s, "resumed", canonOf(t, msgs))
	require.Zero(t, s.metrics.Sum("mnemos.proxy.requests", "outcome", "branched"))
	require.EqualValues(t, 5, s.metrics.Sum("mnemos.proxy.requests", "outcome", "managed"))
}

// TestAForkedSessionImportsItsHistory: a new session id sent with an old
// session's history (claude --fork-session) is a session of its own whose
// main thread holds that history; the old session is unchanged.
func TestAForkedSessionImportsItsHistory(t *testing.T) {
	t.Parallel()
	s := setup(t, echoScript)
	old := newFaithful(t, s, "original").rounds(nil, 3, "the original", nil)
	s.applied(t, "original", 3)
	msgs := newFaithful(t, s, "forked").rounds(old, 2, "the fork", nil)

	stored(t, s, "forked", canonOf(t, msgs), "the fork's first round brought the whole history")
	stored(t, s, "original", canonOf(t, old))
}

// TestARetryRecordsOneRound: the same request sent twice (a client's
// retry) reaches the upstream as sent both times and is recorded once.
func TestARetryRecordsOneRound(t *testing.T) {
	t.Parallel()
	s := setup(t, echoScript)
	f := newFaithful(t, s, "retried")
	msgs := f.rounds(nil, 2, "a question", nil)
	s.applied(t, "retried", 2)
	request := append(msgs, userText("the question that is retried"))
	f.send(request, nil)
	s.applied(t, "retried", 3)
	msgs = f.send(request, nil) // the retry

	msgs = f.send(append(msgs, userText("and on")), nil)
	stored(t, s, "retried", canonOf(t, msgs))
	sess, err := s.store.GetSession(context.Background(), tenant, "retried")
	require.NoError(t, err)
	require.EqualValues(t, 4, sess.AppliedSeq, "four rounds recorded of five requests")
	require.EqualValues(t, 1, s.metrics.Sum("mnemos.proxy.requests", "outcome", "retry"))
}

// TestTwoAgentsAtOnce: the main agent and a subagent of one session send
// at the same time; each reaches the upstream with its own conversation
// and is stored as its own thread.
func TestTwoAgentsAtOnce(t *testing.T) {
	t.Parallel()
	s := setup(t, echoScript)
	main := newFaithful(t, s, "busy")
	mainMsgs := main.send([]sdk.MessageParam{userText("Plan the release.")}, readTool) // the first thread is the main agent's
	s.applied(t, "busy", 1)
	var subMsgs []sdk.MessageParam
	var wg sync.WaitGroup
	wg.Go(func() { mainMsgs = main.rounds(mainMsgs, 5, "Plan the release", readTool) })
	wg.Go(func() { subMsgs = newFaithful(t, s, "busy").rounds(nil, 5, "Check the changelog", readTool) })
	wg.Wait()

	threads := agents(t, s, "busy", 2)
	require.Len(t, threads, 2, "%+v", threads)
	var sub api.AgentThread
	for _, a := range threads {
		if a.Kind == "agent" {
			sub = a
		}
	}
	require.True(t, strings.HasPrefix(sub.AgentID, "agent-"), "%+v", threads)
	stored(t, s, sub.Thread, canonOf(t, subMsgs))
	m := live(t, threads, "main")
	require.Equal(t, "busy", m.Thread)
	stored(t, s, m.Thread, canonOf(t, mainMsgs))
	require.EqualValues(t, 1, s.metrics.Sum("mnemos.proxy.requests", "outcome", "new_agent"))
	require.Zero(t, s.metrics.Sum("mnemos.proxy.requests", "outcome", "branched"))
}

// TestRandomConversationsReachTheUpstreamAsSent sends random sequences of
// what clients do under one session id — append a round, rewind to an
// earlier answer and go on, edit the last message, compact on their own,
// start another agent, retry the last request — and checks every request
// as the upstream received it, then that every conversation the client
// holds is stored as one of the session's threads. The seed is logged;
// MNEMOS_PROXY_SEED replays one.
func TestRandomConversationsReachTheUpstreamAsSent(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("MNEMOS_PROXY_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err)
		seed = n
	}
	t.Logf("seed %d (MNEMOS_PROXY_SEED replays it)", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995)) //nolint:gosec // a test's choices, replayable
	s := setup(t, echoScript)
	const session = "random"
	f := newFaithful(t, s, session)

	type agent struct {
		msgs, last []sdk.MessageParam
		tools      []sdk.ToolUnionParam
	}
	agents := []*agent{{}}
	for step := range 40 {
		a := agents[rng.IntN(len(agents))]
		say := fmt.Sprintf("step %d", step)
		var req []sdk.MessageParam
		switch op := rng.IntN(6); {
		case op == 1 && len(a.msgs) >= 2: // rewind to an earlier answer
			req = append(slices.Clone(a.msgs[:2*rng.IntN(len(a.msgs)/2)]), userText("rewound at "+say))
		case op == 2 && len(a.msgs) >= 2: // edit the last message
			req = append(slices.Clone(a.msgs[:len(a.msgs)-2]), userText("edited at "+say))
		case op == 3 && len(a.msgs) >= 2: // compact on its own
			req = []sdk.MessageParam{userText(clientSummary + " Summary at " + say + ".")}
		case op == 4: // another agent
			a = &agent{tools: readTool}
			agents = append(agents, a)
			req = []sdk.MessageParam{userText("a subagent's task, " + say)}
		case op == 5 && a.last != nil: // a retry
			req = a.last
		default:
			req = append(slices.Clone(a.msgs), userText("go on, "+say))
		}
		a.msgs, a.last = f.send(req, a.tools), req
	}
	for i, a := range agents {
		awaitThread(t, s, session, canonOf(t, a.msgs), "conversation %d", i)
	}
}

// clientSummary starts the summary a client that compacted its own history
// goes on from (Claude Code's words).
const clientSummary = "This session is being continued from a previous conversation that ran out of context."

// awaitThread waits until a thread of session holds want.
func awaitThread(t *testing.T, s *system, session string, want []string, msgAndArgs ...any) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, msgs := range threadMessages(t, s, "m.session_id IN (SELECT thread_id FROM proxy_threads WHERE session_id = $1)", session) {
			if slices.Equal(msgs, want) {
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, msgAndArgs...)
}
