package embedder_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/embedtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/embed"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/embedder"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

const (
	acme   = "acme"
	globex = "globex"
	model  = "scripted-embed"
	dims   = 64
)

var project = memory.Scope{Kind: memory.KindProject, ID: "repo-x"}

// harness is a real Postgres and JetStream with the accountant (applied
// directly), the outbox relay and one embedder, against a scripted
// embeddings server whose failures a test can switch on.
type harness struct {
	t        *testing.T
	store    *store.Store
	bus      *bus.Bus
	acc      *tokenaccounting.Service
	memories *memory.Store
	metrics  *telemetrytest.Reader
	embed    *embedtest.Server
	svc      *embedder.Service
	// down makes the server answer 503; it refuses (400) any batch
	// holding a text containing "REFUSE".
	down atomic.Bool
	seq  map[string]int64
	mu   sync.Mutex
	// scopeless sends turns without a memory scope.
	scopeless bool
}

func setup(t *testing.T) *harness {
	t.Helper()
	ctx := context.Background()
	st := pgtest.New(t)
	metrics := telemetrytest.New(t)
	cfg := bustest.Config(t)
	cfg.Meter = metrics.Meter()
	b := bustest.Connect(t, cfg)
	for _, tenant := range []string{acme, globex} {
		require.NoError(t, st.EnsureTenant(ctx, tenant, tenant))
	}
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, time.Second)
	require.NoError(t, err)
	acc, err := tokenaccounting.New(tokenaccounting.DefaultConfig(), st, b, settings, bustest.Logger(t), nil)
	require.NoError(t, err)
	mem, err := memory.NewStore(st, nil, memory.Options{})
	require.NoError(t, err)
	h := &harness{t: t, store: st, bus: b, acc: acc, memories: mem, metrics: metrics, seq: map[string]int64{}}
	h.embed = embedtest.Start(t, embedtest.Config{Dimensions: dims, Fail: func(inputs []string) (int, string) {
		if h.down.Load() {
			return http.StatusServiceUnavailable, "scripted outage"
		}
		for _, in := range inputs {
			if strings.Contains(in, "REFUSE") {
				return http.StatusBadRequest, "scripted refusal"
			}
		}
		return 0, ""
	}})
	e, err := embed.NewOpenAI(embed.Config{BaseURL: h.embed.URL + "/v1", Model: model})
	require.NoError(t, err)
	metered, err := embed.Metered(e, metrics.Meter(), embed.PurposeIndex)
	require.NoError(t, err)
	c := embedder.DefaultConfig()
	c.MemoryEvery = time.Hour // the tests say when memories are checked
	h.svc, err = embedder.New(c, st, b, metered, bustest.Logger(t), metrics.Meter())
	require.NoError(t, err)

	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	r := outbox.New(outbox.Config{Batch: 128, Poll: 20 * time.Millisecond}, st, b, bustest.Logger(t))
	wg.Go(func() { _ = r.Run(runCtx) })
	done := make(chan error, 1)
	go func() { done <- h.svc.Run(runCtx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done); wg.Wait() })
	return h
}

// turn sends one round of a session of tenant through the accountant: the
// user's text, then the assistant's answer; empty texts make a tool call
// and its result instead.
func (h *harness) turn(tenant, session, user, answer string) {
	h.t.Helper()
	h.mu.Lock()
	h.seq[tenant+session]++
	seq := h.seq[tenant+session]
	h.mu.Unlock()
	id := fmt.Sprintf("%s-%s-%d", tenant, session, seq)
	userMsg := turn.Message{UUID: id + "-u", Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: user}}}
	resp := turn.Message{UUID: id + "-a", Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: turn.BlockText, Text: answer}}}
	if user == "" {
		result := turn.Content{{Type: turn.BlockText, Text: "file.go"}}
		userMsg.Content = turn.Content{{Type: turn.BlockToolResult, ToolUseID: "toolu_" + id, Content: &result}}
	}
	if answer == "" {
		resp.StopReason = "tool_use"
		resp.Content = turn.Content{{Type: turn.BlockToolUse, ID: "toolu_" + id, Name: "Bash", Input: json.RawMessage(`{"command":"ls"}`)}}
	}
	ev := turn.Event{
		Schema: turn.SchemaV1, EventID: id, TenantID: tenant, SessionID: session, Seq: seq, AgentID: "main",
		MemoryScope: map[string]string{"project": project.ID}, Model: "claude-sonnet-4-5", ContextWindow: 200_000, MaxOutputTokens: 32_000,
		InputMessages: []turn.Message{userMsg}, Response: &resp,
		Usage:      &turn.Usage{InputTokens: 1000 * seq, OutputTokens: tokens.EstimateMessage(resp)},
		OccurredAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(seq) * time.Minute),
	}
	if h.scopeless {
		ev.MemoryScope = nil
	}
	require.NoError(h.t, h.acc.Apply(context.Background(), ev))
}

// vectors reads the message vectors of the tenant's scope as the search does.
func (h *harness) vectors(tenant string) map[int64][]byte {
	h.t.Helper()
	out := map[int64][]byte{}
	require.NoError(h.t, h.store.InTx(context.Background(), tenant, func(tx *store.Tx) error {
		vs, err := scopeVectors(tx)
		for _, v := range vs {
			out[v.Position] = v.Vector
		}
		return err
	}))
	return out
}

// scopeVectors reads the vectors of model of every message of the
// project's sessions, as a search that keeps none does.
func scopeVectors(tx *store.Tx) ([]store.MessageVector, error) {
	sessions, err := tx.ScopeVectorSessions(context.Background(), map[string]string{"project": project.ID}, "")
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, s := range sessions {
		ids = append(ids, s.SessionID)
	}
	return tx.SessionMessageVectors(context.Background(), ids, model)
}

// marked is how many messages of the session the embedder has read.
func (h *harness) marked(tenant, session string) int64 {
	h.t.Helper()
	var n int64
	require.NoError(h.t, h.store.InTx(context.Background(), tenant, func(tx *store.Tx) error {
		var err error
		n, err = tx.MessageVectorResume(context.Background(), session, model)
		return err
	}))
	return n
}

func (h *harness) memoryVectors(tenant string) map[string][]byte {
	h.t.Helper()
	out := map[string][]byte{}
	require.NoError(h.t, h.store.InTx(context.Background(), tenant, func(tx *store.Tx) error {
		vs, err := tx.ScopeMemoryVectors(context.Background(), project.String(), model)
		for _, v := range vs {
			out[v.Name] = v.Vector
		}
		return err
	}))
	return out
}

func (h *harness) write(tenant, name, description, body string) {
	h.t.Helper()
	_, err := h.memories.Write(context.Background(), tenant, project,
		memory.Document{Name: memory.Name(name), Description: description, Type: memory.TypeProject, Body: body},
		memory.Change{Actor: memory.ActorAPI, Reason: "test"}, memory.Expect{})
	require.NoError(h.t, err)
}

func (h *harness) vectorOf(text string) []byte { return embed.Encode(h.embed.Vector(text, dims)) }

// TestMessagesAreEmbeddedOnceInTheBackground: every message with text gets
// the vector of its text blocks; tool calls and results are marked read
// without one; a session read again sends nothing more.
func TestMessagesAreEmbeddedOnceInTheBackground(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.turn(acme, "s1", "Where do the release notes live?", "In docs/releases, one file per version.")
	h.turn(acme, "s1", "", "")
	h.turn(acme, "s1", "Thanks, and who signs them off?", "The release manager of the week.")
	require.Eventually(t, func() bool { return h.marked(acme, "s1") == 6 }, 30*time.Second, 20*time.Millisecond)

	vs := h.vectors(acme)
	require.Len(t, vs, 4, "the tool call and its result have no text")
	require.Equal(t, h.vectorOf("Where do the release notes live?"), vs[0])
	require.Equal(t, h.vectorOf("In docs/releases, one file per version."), vs[1])
	require.Equal(t, h.vectorOf("The release manager of the week."), vs[5])
	require.Eventually(t, func() bool {
		return h.metrics.Sum("mnemos.embedder.messages", "outcome", embedder.OutcomeEmbedded) == 4 &&
			h.metrics.Sum("mnemos.embedder.messages", "outcome", embedder.OutcomeNoText) == 2
	}, 10*time.Second, 10*time.Millisecond)

	sent := len(h.embed.Inputs())
	require.NoError(t, h.svc.EmbedSession(context.Background(), acme, "s1"), "a redelivered event")
	require.Len(t, h.embed.Inputs(), sent, "nothing embedded twice")
	require.Positive(t, h.metrics.Sum("mnemos.embed.requests", "outcome", "ok"))
}

// TestARefusedTextLosesNothingElse: the endpoint refusing one text leaves
// that message without a vector, counted, and its batch's others and the
// next turns embedded; an outage is retried until the endpoint answers.
func TestARefusedTextLosesNothingElse(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.turn(acme, "s1", "please REFUSE this one", "an answer that is fine")
	require.Eventually(t, func() bool { return h.marked(acme, "s1") == 2 }, 30*time.Second, 20*time.Millisecond)
	vs := h.vectors(acme)
	require.Len(t, vs, 1)
	require.Equal(t, h.vectorOf("an answer that is fine"), vs[1])
	require.Eventually(t, func() bool {
		return h.metrics.Sum("mnemos.embedder.messages", "outcome", embedder.OutcomeRefused) == 1
	}, 10*time.Second, 10*time.Millisecond)

	h.down.Store(true)
	h.turn(acme, "s1", "asked while the endpoint is down", "and answered")
	require.Eventually(t, func() bool {
		return h.metrics.Sum("mnemos.embed.requests", "outcome", "server") > 0
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, int64(2), h.marked(acme, "s1"), "nothing stored while it is down")
	h.down.Store(false)
	require.Eventually(t, func() bool { return h.marked(acme, "s1") == 4 }, 60*time.Second, 50*time.Millisecond, "the redelivery embeds them")
	require.Equal(t, h.vectorOf("asked while the endpoint is down"), h.vectors(acme)[2])
}

// TestBadEventsAreDeadLettered: events that cannot be read are refused
// with their reason and counted, and the next event is handled.
func TestBadEventsAreDeadLettered(t *testing.T) {
	t.Parallel()
	h := setup(t)
	sub, err := h.bus.Conn().SubscribeSync(h.bus.Prefix("deadletter.>"))
	require.NoError(t, err)
	other, err := json.Marshal(events.TurnAccounted{Schema: events.SchemaTurnAccounted, TenantID: globex, SessionID: "bad", Seq: 1})
	require.NoError(t, err)
	badScope, err := json.Marshal(events.MemorySaved{Schema: events.SchemaMemorySaved, TenantID: acme, SessionID: "bad", Scope: "nowhere", RunID: "r1"})
	require.NoError(t, err)
	for i, m := range []struct {
		kind string
		data []byte
	}{{bus.KindTurnAccounted, []byte("{not json")}, {bus.KindTurnAccounted, other}, {bus.KindMemorySaved, badScope}} {
		_, err := h.bus.Publish(context.Background(), h.bus.Subject(m.kind, acme, "bad"), fmt.Sprintf("bad-%d", i), m.data, nil)
		require.NoError(t, err)
	}
	var reasons []string
	for range 3 {
		msg, err := sub.NextMsg(30 * time.Second)
		require.NoError(t, err)
		reasons = append(reasons, msg.Header.Get(bus.HeaderDeadLetterReason))
	}
	all := strings.Join(reasons, "\n")
	require.Contains(t, all, "invalid character")
	require.Contains(t, all, "arrived on the subject of acme/bad")
	require.Contains(t, all, `scope "nowhere"`)
	require.Eventually(t, func() bool {
		return h.metrics.Sum("mnemos.bus.deliveries", "result", string(bus.DeadLettered)) == 3
	}, 10*time.Second, 10*time.Millisecond)

	h.turn(acme, "s1", "the next event", "is handled")
	require.Eventually(t, func() bool { return h.marked(acme, "s1") == 2 }, 30*time.Second, 20*time.Millisecond)
}

// TestMemoriesAreEmbeddedAtTheirRevision: a memory written by the API (no
// event) is embedded on the scope's next turn, again once it changes, and
// at once on memory.saved; a deleted memory's vector is never read.
func TestMemoriesAreEmbeddedAtTheirRevision(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.write(acme, "release-day", "Releases go out on Tuesdays", "After the 10:00 stand-up.")
	h.turn(acme, "s1", "hello", "hi")
	text := embedder.MemoryText("release-day", "Releases go out on Tuesdays", "After the 10:00 stand-up.")
	require.Eventually(t, func() bool { return len(h.memoryVectors(acme)) == 1 }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, h.vectorOf(text), h.memoryVectors(acme)["release-day"])

	h.write(acme, "release-day", "Releases go out on Wednesdays", "After the 10:00 stand-up.")
	ev := events.MemorySaved{Schema: events.SchemaMemorySaved, TenantID: acme, SessionID: "s1", Scope: project.String(), Updated: []string{"release-day"}, RunID: "r1", SourceTurn: "e1", Seq: 1}
	data, err := json.Marshal(ev)
	require.NoError(t, err)
	_, err = h.bus.Publish(context.Background(), h.bus.Subject(bus.KindMemorySaved, acme, "s1"), ev.MsgID(), data, nil)
	require.NoError(t, err)
	changed := embedder.MemoryText("release-day", "Releases go out on Wednesdays", "After the 10:00 stand-up.")
	require.Eventually(t, func() bool {
		return string(h.memoryVectors(acme)["release-day"]) == string(h.vectorOf(changed))
	}, 30*time.Second, 20*time.Millisecond)

	_, err = h.memories.Delete(context.Background(), acme, project, "release-day", memory.Change{Actor: memory.ActorAPI}, memory.Expect{})
	require.NoError(t, err)
	require.Empty(t, h.memoryVectors(acme))
}

// TestSessionsWithoutAScopeAreNotEmbedded: search reaches only sessions
// that name a memory scope; no other is sent to the endpoint.
func TestSessionsWithoutAScopeAreNotEmbedded(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.scopeless = true
	h.turn(acme, "loose", "a session of no scope", "stays unembedded")
	h.scopeless = false
	h.turn(acme, "s1", "a scoped one", "is embedded")
	require.Eventually(t, func() bool { return h.marked(acme, "s1") == 2 }, 30*time.Second, 20*time.Millisecond)
	require.Zero(t, h.marked(acme, "loose"))
	require.Equal(t, []string{"a scoped one", "is embedded"}, h.embed.Inputs())
}

// TestTenantsKeepTheirVectors: two tenants with the same session and scope
// names each read only their own vectors.
func TestTenantsKeepTheirVectors(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.turn(acme, "s1", "acme's secret plan", "noted")
	h.turn(globex, "s1", "globex's own words", "noted too")
	require.Eventually(t, func() bool { return h.marked(acme, "s1") == 2 && h.marked(globex, "s1") == 2 }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, h.vectorOf("acme's secret plan"), h.vectors(acme)[0])
	require.Equal(t, h.vectorOf("globex's own words"), h.vectors(globex)[0])
	var n int
	require.NoError(t, h.store.InTx(context.Background(), "nobody", func(tx *store.Tx) error {
		vs, err := scopeVectors(tx)
		n = len(vs)
		return err
	}))
	require.Zero(t, n)
}
