package recall_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/context/sessionctx"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/anthropic"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/llm/openai"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

const tenant = "acme"

var (
	t0      = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	project = memory.Scope{Kind: memory.KindProject, ID: "repo-x"}
	user    = memory.Scope{Kind: memory.KindUser, ID: "u-42"}
	scopes  = map[string]string{"project": "repo-x", "user": "u-42"}
)

// env is a real Postgres with the memory store, the accountant (to store
// sessions' messages as ingest does) and a Recaller on a chosen selector.
type env struct {
	store    *store.Store
	memories *memory.Store
	recaller *recall.Recaller
	metrics  *telemetrytest.Reader
	acc      *tokenaccounting.Service
	// clock is the time memories are written at and recalled at.
	clock atomic.Int64
	mu    sync.Mutex
	set   recall.Settings
}

func setup(t *testing.T, provider llm.Provider) *env {
	t.Helper()
	st := pgtest.New(t)
	require.NoError(t, st.EnsureTenant(context.Background(), tenant, "Acme"))
	e := &env{store: st, metrics: telemetrytest.New(t), set: recall.DefaultSettings()}
	e.clock.Store(t0.UnixNano())
	now := func() time.Time { return time.Unix(0, e.clock.Load()).UTC() }
	var err error
	e.memories, err = memory.NewStore(st, nil, memory.Options{Now: now})
	require.NoError(t, err)
	if provider == nil {
		provider = builtin.New(map[llm.Task]builtin.Handler{llm.TaskRecall: recall.Builtin})
	}
	e.recaller, err = recall.New(st, e.memories, provider, func(context.Context, string) (recall.Settings, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.set, nil
	}, e.metrics.Meter(), recall.Options{Now: now})
	require.NoError(t, err)
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, time.Second)
	require.NoError(t, err)
	e.acc, err = tokenaccounting.New(tokenaccounting.DefaultConfig(), st, bustest.New(t), settings, bustest.Logger(t), nil)
	require.NoError(t, err)
	return e
}

func (e *env) settings(change func(*recall.Settings)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	change(&e.set)
}

func (e *env) at(t time.Time) { e.clock.Store(t.UnixNano()) }

// write saves a memory at time at.
func (e *env) write(t *testing.T, scope memory.Scope, name string, typ memory.Type, desc, body string, at time.Time) {
	t.Helper()
	prev := e.clock.Load()
	e.at(at)
	defer e.clock.Store(prev)
	_, err := e.memories.Write(context.Background(), tenant, scope, memory.Document{Name: memory.Name(name), Description: desc, Type: typ, Body: body},
		memory.Change{Actor: memory.ActorAPI, Reason: "test"}, memory.Expect{})
	require.NoError(t, err)
}

func (e *env) recall(t *testing.T, session, query string, tools ...string) recall.Result {
	t.Helper()
	res, err := e.recaller.Recall(context.Background(), recall.Query{Tenant: tenant, SessionID: session, MemoryScope: scopes,
		Text: query, RecentTools: tools, Source: recall.SourceAPI})
	require.NoError(t, err)
	return res
}

// round stores one API round of a session as the accountant does: a user
// message with text (and tool results, when given) and a response; it
// returns the user message's uuid.
func (e *env) round(t *testing.T, session string, seq int64, text string, response ...turn.Block) string {
	t.Helper()
	if len(response) == 0 {
		response = []turn.Block{{Type: turn.BlockText, Text: "Done."}}
	}
	u := fmt.Sprintf("%s-u%d", session, seq)
	ev := turn.Event{
		Schema: turn.SchemaV1, EventID: fmt.Sprintf("%s-e%d", session, seq), TenantID: tenant, SessionID: session, Seq: seq,
		Model: "claude-sonnet-4-5", MemoryScope: scopes, OccurredAt: t0.Add(time.Duration(seq) * time.Minute),
		InputMessages: []turn.Message{{UUID: u, Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: text}}}},
		Response:      &turn.Message{UUID: fmt.Sprintf("%s-a%d", session, seq), Role: "assistant", Content: response, StopReason: "end_turn"},
		Usage:         &turn.Usage{InputTokens: 100, OutputTokens: 10},
	}
	require.NoError(t, e.acc.Apply(context.Background(), ev))
	return u
}

func (e *env) prefetch(t *testing.T, session string, seq int64, uuids ...string) recall.Result {
	t.Helper()
	res, err := e.recaller.Prefetch(context.Background(), recall.Turn{Tenant: tenant, SessionID: session, Seq: seq, MemoryScope: scopes, MessageUUIDs: uuids})
	require.NoError(t, err)
	return res
}

// beside reads what the context of session shows beside its user
// messages, the way the gateway decides it at time now.
func (e *env) beside(t *testing.T, session string, now time.Time) recall.Beside {
	t.Helper()
	var b recall.Beside
	e.mu.Lock()
	set := e.set
	e.mu.Unlock()
	require.NoError(t, e.store.InTx(context.Background(), tenant, func(tx *store.Tx) error {
		st, err := sessionctx.Load(context.Background(), tx, session)
		if err != nil {
			return err
		}
		b, err = recall.Attach(context.Background(), tx, st.Session, st.Messages, set, now)
		return err
	}))
	return b
}

func names(ms []recall.Memory) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Name))
	}
	return out
}

// recorder keeps the guarded calls.
type recorder struct {
	mu    sync.Mutex
	calls []llm.Call
}

func (r *recorder) Record(_ context.Context, c llm.Call) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	return nil
}

// TestAnInventedNameIsDroppedAndCountedTheRestSurfaced runs the selector
// through the real Anthropic and OpenAI SDK clients against local servers
// that answer as scripted: one of the names the model picks is not a
// memory. It is dropped and counted; the other picks are surfaced, in the
// model's order. The call is recorded under task "recall".
func TestAnInventedNameIsDroppedAndCountedTheRestSurfaced(t *testing.T) {
	t.Parallel()
	answer := `{"memories": ["project:repo-x/staging-db-read-only-fridays", "staging-runbook-2019", "deploy-window.md"]}`
	for name, newProvider := range map[string]func(*testing.T) (llm.Provider, *llmtest.Server){
		"anthropic": func(t *testing.T) (llm.Provider, *llmtest.Server) {
			srv := llmtest.NewAnthropicServer(t, llmtest.Sequence(llmtest.Text(answer)))
			p, err := anthropic.New(anthropic.Config{APIKey: "test-key", BaseURL: srv.URL})
			require.NoError(t, err)
			return p, srv
		},
		"openai": func(t *testing.T) (llm.Provider, *llmtest.Server) {
			srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text(answer)))
			p, err := openai.New(openai.Config{APIKey: "test-key", BaseURL: srv.URL})
			require.NoError(t, err)
			return p, srv
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, srv := newProvider(t)
			var rec recorder
			e := setup(t, llm.Guard(raw, llm.GuardOptions{Recorder: &rec}))
			e.write(t, project, "staging-db-read-only-fridays", memory.TypeFeedback, "The staging database is read-only on Fridays",
				"Migrations on staging wait until Monday.\n\n**Why:** the replica sync runs on Fridays.\n**How to apply:** schedule for Monday.", t0)
			e.write(t, project, "deploy-window", memory.TypeProject, "Deploys go out on Tuesdays after the standup", "Tuesdays, 11:00.", t0)
			e.write(t, user, "prefers-short-answers", memory.TypeUser, "The user wants terse replies", "No summaries.", t0)

			res := e.recall(t, "s1", "can you run the migration on the staging database?", "Bash")
			require.Equal(t, recall.OutcomeSurfaced, res.Outcome)
			require.Equal(t, []string{"staging-db-read-only-fridays", "deploy-window"}, names(res.Memories))
			require.Equal(t, []string{"staging-runbook-2019"}, res.Invented)
			require.Equal(t, 1, res.Dropped[recall.ReasonInvented])
			require.Equal(t, 3, res.Candidates)
			require.EqualValues(t, 1, e.metrics.Sum("mnemos.recall.dropped", "reason", "invented"))
			require.EqualValues(t, 2, e.metrics.Sum("mnemos.recall.selected", "source", "api"))
			require.EqualValues(t, 1, e.metrics.Sum("mnemos.recall.requests", "outcome", "surfaced"))
			require.Contains(t, res.Memories[0].Text, "Migrations on staging wait until Monday.")

			reqs := srv.Requests()
			require.Len(t, reqs, 1)
			require.True(t, reqs[0].JSON, "a JSON answer is asked for")
			require.Contains(t, reqs[0].System, "at most 5")
			require.Contains(t, reqs[0].System, "leave out reference memories that explain how to use one of those tools")
			msg := reqs[0].Messages[0].Text
			require.Contains(t, msg, "Tools just used: Bash\n")
			require.Regexp(t, `\nMemories:\n- project:repo-x/staging-db-read-only-fridays \[feedback, saved today, match \d+\.\d\]: The staging database is read-only on Fridays\n`, msg,
				"the memory the request's words find comes first, with its match")
			require.Contains(t, msg, "- user:u-42/prefers-short-answers [user, saved today]: The user wants terse replies\n", "the others have none")
			require.Contains(t, reqs[0].System, "a match says only that the memory shares words with the request")
			// The request comes last (the Anthropic provider may follow it
			// with how to give the answer).
			require.Contains(t, msg, "\n\nRequest:\ncan you run the migration on the staging database?", msg)
			require.NotContains(t, msg[strings.Index(msg, "Request:"):], "- ", "no memory after the request")
			require.Len(t, rec.calls, 1)
			require.Equal(t, llm.TaskRecall, rec.calls[0].Task)
			require.Equal(t, tenant, rec.calls[0].Tenant)
			require.Positive(t, rec.calls[0].Usage.InputTokens)

			// Surfaced once per session: the next recall no longer offers them.
			again := e.recall(t, "s1", "and the staging database again?")
			require.Equal(t, 1, again.Candidates, "only the memory not yet surfaced is a candidate")
			require.Len(t, srv.Requests(), 2)
			require.NotContains(t, srv.Requests()[1].Messages[0].Text, "staging-db-read-only-fridays")
			require.Empty(t, again.Memories, "the script's picks are no longer candidates: invented now")
			require.Equal(t, recall.OutcomeNone, again.Outcome)
			require.Equal(t, 3, again.Dropped[recall.ReasonInvented])
		})
	}
}

// TestSurfacedMemoriesCarryTheirAge: with an injected clock, memories
// saved 0, 1, 2 and 30 days ago surface headed "today", "yesterday",
// "2 days ago" and "30 days ago", the last two with the note to verify.
func TestSurfacedMemoriesCarryTheirAge(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	for _, days := range []int{0, 1, 2, 30} {
		e.write(t, project, fmt.Sprintf("staging-fact-%d", days), memory.TypeProject,
			fmt.Sprintf("Staging database fact number %d", days), "A fact.", t0.Add(-time.Duration(days)*24*time.Hour))
	}
	e.at(t0.Add(time.Hour))
	res := e.recall(t, "s1", "what do we know about the staging database?")
	require.Len(t, res.Memories, 4)
	want := map[string]string{"staging-fact-0": "today", "staging-fact-1": "yesterday", "staging-fact-2": "2 days ago", "staging-fact-30": "30 days ago"}
	for _, m := range res.Memories {
		age := want[string(m.Name)]
		require.Equal(t, age, recall.AgeText(m.AgeDays), m.Name)
		require.Contains(t, m.Text, "(project, saved "+age+").", m.Name)
		require.Equal(t, m.AgeDays >= 2, m.Stale, m.Name)
		require.Equal(t, m.AgeDays >= 2, strings.Contains(m.Text, "point-in-time observation"), m.Name)
	}
}

// TestTheSessionBudgetStopsSurfacing: memories of about 4 KB each are
// surfaced until the session has been shown 60 KB (the one that crosses
// it is shown whole); after that the picks are dropped (cap) and recall
// asks no selector at all.
func TestTheSessionBudgetStopsSurfacing(t *testing.T) {
	t.Parallel()
	// A selector that picks the first five memories listed.
	var calls atomic.Int64
	selector := builtin.New(map[llm.Task]builtin.Handler{llm.TaskRecall: func(_ context.Context, req llm.Request) (llm.Response, error) {
		calls.Add(1)
		var refs []string
		for _, line := range strings.Split(req.Messages[0].Content[0].Text, "\n") {
			if ref, _, ok := strings.Cut(strings.TrimPrefix(line, "- "), " ["); ok && strings.HasPrefix(line, "- ") && len(refs) < 5 {
				refs = append(refs, fmt.Sprintf("%q", ref))
			}
		}
		return llm.Response{Text: `{"memories": [` + strings.Join(refs, ",") + `]}`}, nil
	}})
	e := setup(t, selector)
	body := strings.TrimSpace(strings.Repeat("The staging cluster notes go on for a while. ", 100)) // 4,499 bytes: cut to 4,096
	for i := range 30 {
		e.write(t, project, fmt.Sprintf("staging-note-%02d", i), memory.TypeProject, fmt.Sprintf("Staging cluster note %d", i), body, t0)
	}
	const budget = 60 << 10
	var total int64
	var shown int
	for recalls := 0; total < budget; recalls++ {
		require.Less(t, recalls, 10)
		res := e.recall(t, "s1", "tell me about the staging cluster")
		for _, m := range res.Memories {
			require.Less(t, total, int64(budget), "nothing is shown once the budget is spent")
			require.True(t, m.Truncated)
			total += int64(len(m.Text))
			shown++
		}
		require.Equal(t, total, res.SessionBytes)
	}
	size := total / int64(shown)
	require.Less(t, total-size, int64(budget), "the last memory shown crossed the budget")
	require.Equal(t, int(budget/size)+1, shown)
	require.EqualValues(t, 5-shown%5, e.metrics.Sum("mnemos.recall.dropped", "reason", "cap"), "the picks after it")

	before := calls.Load()
	res := e.recall(t, "s1", "tell me about the staging cluster")
	require.Equal(t, recall.OutcomeCapped, res.Outcome)
	require.Empty(t, res.Memories)
	require.Equal(t, before, calls.Load(), "a spent budget asks no selector")
	require.EqualValues(t, 1, e.metrics.Sum("mnemos.recall.requests", "outcome", "capped"))

	other := e.recall(t, "s2", "tell me about the staging cluster")
	require.Len(t, other.Memories, 5, "the budget is per session")
}

// TestPrefetchIsShownBesideItsMessageUnlessTheContextDecidedFirst: a
// prefetch records its memories beside its user message; when the context
// already showed the message (decided it shows nothing), a later prefetch
// is late and surfaces nothing, so its memories stay available.
func TestPrefetchIsShownBesideItsMessageUnlessTheContextDecidedFirst(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.write(t, project, "staging-db-read-only-fridays", memory.TypeFeedback, "The staging database is read-only on Fridays", "Wait for Monday.", t0)
	e.write(t, project, "deploy-window", memory.TypeProject, "Deploys go out on Tuesdays after the standup", "Tuesdays.", t0)

	u1 := e.round(t, "s1", 1, "can you run the migration on the staging database?",
		turn.Block{Type: turn.BlockToolUse, ID: "t1", Name: "Bash", Input: []byte(`{"command":"make migrate"}`)})
	res := e.prefetch(t, "s1", 1, u1, "s1-a1")
	require.Equal(t, recall.OutcomeSurfaced, res.Outcome)
	require.Equal(t, []string{"staging-db-read-only-fridays"}, names(res.Memories))
	b := e.beside(t, "s1", time.Now())
	require.Empty(t, b.Waiting)
	require.Len(t, b.Blocks[u1], 1)
	require.Equal(t, res.Memories[0].Text, b.Blocks[u1][0].Text)
	again := e.prefetch(t, "s1", 1, u1, "s1-a1")
	require.Equal(t, recall.OutcomeLate, again.Outcome, "a redelivered turn changes nothing")
	require.Equal(t, b, e.beside(t, "s1", time.Now()), "what is shown is decided once")

	// The context shows the next message before its prefetch ends.
	u2 := e.round(t, "s1", 2, "when do deploys go out this week?")
	b = e.beside(t, "s1", time.Now())
	require.Equal(t, u2, b.Waiting, "the latest user message waits for its prefetch")
	require.WithinDuration(t, time.Now().Add(3*time.Second), b.Until, 2*time.Second)
	b = e.beside(t, "s1", time.Now().Add(time.Minute))
	require.Empty(t, b.Waiting, "past the wait, the message is decided as showing nothing")
	require.NotContains(t, b.Blocks, u2)
	late := e.prefetch(t, "s1", 2, u2, "s1-a2")
	require.Equal(t, recall.OutcomeLate, late.Outcome)
	require.Empty(t, late.Memories)
	require.NotContains(t, e.beside(t, "s1", time.Now()).Blocks, u2)
	require.EqualValues(t, 2, e.metrics.Sum("mnemos.recall.requests", "outcome", "late"))

	// What a late prefetch picked was not surfaced: a later one may be.
	u3 := e.round(t, "s1", 3, "so which day do deploys go out?")
	res = e.prefetch(t, "s1", 3, u3, "s1-a3")
	require.Equal(t, []string{"deploy-window"}, names(res.Memories))

	// A prefetch that finds a newer user message leaves it to that one's.
	u4 := e.round(t, "s1", 4, "check the deploy window")
	e.round(t, "s1", 5, "and the staging database")
	require.Equal(t, recall.OutcomeSkipped, e.prefetch(t, "s1", 4, u4, "s1-a4").Outcome)
	require.EqualValues(t, 1, e.metrics.Sum("mnemos.recall.requests", "outcome", "skipped"))
	b = e.beside(t, "s1", time.Now())
	require.Equal(t, "s1-u5", b.Waiting)
	require.NotContains(t, b.Blocks, u4, "an older message still undecided is decided as showing nothing")

	// One word is no request to recall for.
	u6 := e.round(t, "s1", 6, "thanks")
	require.Equal(t, recall.OutcomeSkipped, e.prefetch(t, "s1", 6, u6).Outcome)
	require.EqualValues(t, 1, e.metrics.Sum("mnemos.recall.requests", "outcome", "skipped"), "not counted")
	require.EqualValues(t, 5, e.metrics.Sum("mnemos.recall.requests", "source", "prefetch"), "surfaced twice, late twice, skipped once")
}

// TestRecallTurnedOffSurfacesNothing: a tenant that turns recall off gets
// no recall through the API, and no prefetch.
func TestRecallTurnedOffSurfacesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.write(t, project, "staging-db-read-only-fridays", memory.TypeFeedback, "The staging database is read-only on Fridays", "Wait for Monday.", t0)
	u1 := e.round(t, "s1", 1, "can you run the migration on the staging database?")
	e.settings(func(s *recall.Settings) { s.Prefetch = false })
	require.Equal(t, recall.OutcomeDisabled, e.prefetch(t, "s1", 1, u1).Outcome)
	require.Empty(t, e.beside(t, "s1", time.Now()).Waiting, "no prefetch to wait for")
	require.NotContains(t, e.beside(t, "s1", time.Now()).Blocks, u1)
	require.Len(t, e.recall(t, "s1", "the staging database").Memories, 1, "the API still recalls")

	e.settings(func(s *recall.Settings) { s.Enabled = false })
	res := e.recall(t, "s2", "the staging database")
	require.Equal(t, recall.OutcomeDisabled, res.Outcome)
	require.Empty(t, res.Memories)
	require.EqualValues(t, 1, e.metrics.Sum("mnemos.recall.requests", "outcome", "disabled"), "the API's, not the prefetch's")
}

// TestPrefetchTakesTheToolsOfTheLatestRounds: the tools the agent called in
// the latest rounds are the tools just used, so a prefetch leaves out the
// usage reference of one of them but keeps the warning about it; a tool
// called longer ago than recent_rounds does not count.
func TestPrefetchTakesTheToolsOfTheLatestRounds(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.write(t, project, "bash-usage", memory.TypeReference, "How the Bash tool runs commands in the repo sandbox", "Commands run in /work.", t0)
	e.write(t, project, "bash-sandbox-pitfalls", memory.TypeReference, "Bash in the repo sandbox hangs on interactive commands; pass --yes", "Use --yes.", t0)
	bash := turn.Block{Type: turn.BlockToolUse, ID: "t1", Name: "Bash", Input: []byte(`{"command":"ls"}`)}
	e.round(t, "s1", 1, "list the files", bash)
	u := e.round(t, "s1", 2, "now run the bash commands in the repo sandbox")
	res := e.prefetch(t, "s1", 2, u)
	require.Equal(t, []string{"bash-sandbox-pitfalls"}, names(res.Memories), "Bash was used a round ago: its usage reference is left out")

	e.settings(func(s *recall.Settings) { s.RecentRounds = 1 })
	e.round(t, "s2", 1, "list the files", bash)
	e.round(t, "s2", 2, "thanks")
	u = e.round(t, "s2", 3, "now run the bash commands in the repo sandbox")
	res = e.prefetch(t, "s2", 3, u)
	require.ElementsMatch(t, []string{"bash-usage", "bash-sandbox-pitfalls"}, names(res.Memories), "with one recent round, Bash two rounds ago is not just used")
}
