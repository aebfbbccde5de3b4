// Package tracing_test follows one turn through the services, on a real
// Postgres and a real JetStream, and reads the trace it leaves.
package tracing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/telemetry"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/compactor"
	"github.com/mnemos-ai/mnemos/services/gateway"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

// spans indexes what the exporter holds.
type spans []tracetest.SpanStub

// named returns the one span with that name, failing when there is not exactly one.
func (s spans) named(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, sp := range s {
		if sp.Name == name {
			found = append(found, sp)
		}
	}
	require.Equal(t, 1, len(found), "spans named %q", name)
	return found[0]
}

// childNamed returns a span with that name whose parent is parent.
func (s spans) childNamed(t *testing.T, parent tracetest.SpanStub, name string) tracetest.SpanStub {
	t.Helper()
	for _, sp := range s {
		if sp.Name == name && sp.Parent.SpanID() == parent.SpanContext.SpanID() {
			return sp
		}
	}
	t.Fatalf("no span %q under %q", name, parent.Name)
	return tracetest.SpanStub{}
}

// parentOf returns the span whose id is child's parent.
// batchedUnder returns the span of a pipelined batch under parent that
// sent the statement named query (one of the batch span's query events).
func (s spans) batchedUnder(t *testing.T, parent tracetest.SpanStub, query string) tracetest.SpanStub {
	t.Helper()
	for _, sp := range s {
		if sp.Name != "batch" || sp.Parent.SpanID() != parent.SpanContext.SpanID() {
			continue
		}
		for _, ev := range sp.Events {
			if ev.Name == "query" && slices.Contains(ev.Attributes, semconv.DBQuerySummary(query)) {
				return sp
			}
		}
	}
	t.Fatalf("no batch sending %q under %q", query, parent.Name)
	return tracetest.SpanStub{}
}

func (s spans) parentOf(child tracetest.SpanStub) (tracetest.SpanStub, bool) {
	for _, sp := range s {
		if sp.SpanContext.SpanID() == child.Parent.SpanID() {
			return sp, true
		}
	}
	return tracetest.SpanStub{}, false
}

// requireDescends walks child's parent span ids up to ancestor.
func (s spans) requireDescends(t *testing.T, child, ancestor tracetest.SpanStub) {
	t.Helper()
	path := []string{child.Name}
	for cur := child; ; {
		p, ok := s.parentOf(cur)
		require.True(t, ok, "%q does not descend from %q: the chain %v ends without a parent", child.Name, ancestor.Name, path)
		path = append(path, p.Name)
		if p.SpanContext.SpanID() == ancestor.SpanContext.SpanID() {
			return
		}
		cur = p
	}
}

// requireChildOf checks a direct parent link, by span id.
func requireChildOf(t *testing.T, child, parent tracetest.SpanStub) {
	t.Helper()
	require.Equal(t, parent.SpanContext.SpanID(), child.Parent.SpanID(), "%q is the parent of %q", parent.Name, child.Name)
	require.Equal(t, parent.SpanContext.TraceID(), child.SpanContext.TraceID())
}

// startTraced runs the gateway, the accountant, the outbox relay and, with
// compact, the compactor (the guarded builtin provider) on a real Postgres
// and JetStream, every span they make kept by the exporter it returns. The
// tenant acme's key is trace-key.
func startTraced(t *testing.T, compact bool) (*store.Store, *httptest.Server, *tracetest.InMemoryExporter) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	log := bustest.Logger(t)

	st, err := store.Open(ctx, store.Config{URL: pgtest.URL(t), MaxConns: 8, Tracer: store.NewTracer(tp)})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
	require.NoError(t, st.AddAPIKey(ctx, "acme", "test", "trace-key"))
	bcfg := bustest.Config(t)
	bcfg.TracerProvider = tp
	b := bustest.Connect(t, bcfg)
	metrics, err := telemetry.NewMetrics("test")
	require.NoError(t, err)
	// The tenant's settings and its key are cached as a serving process
	// caches them: for longer than a test takes, the key while its
	// revocations are heard (Keys.Listen). A read that asked Postgres for
	// either again would count a round trip its context read did not make.
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, time.Minute)
	require.NoError(t, err)
	gcfg := gateway.DefaultConfig()
	gcfg.Keys, err = httpapi.NewKeys(httpapi.KeysConfig{CacheTTL: time.Minute}, st, nil, log, noop.NewMeterProvider().Meter("test"))
	require.NoError(t, err)
	heard := make(chan struct{})
	var once sync.Once
	gcfg.Keys.Watch(func(hash string) {
		if hash == "" {
			once.Do(func() { close(heard) })
		}
	})

	acc, err := tokenaccounting.New(tokenaccounting.DefaultConfig(), st, b, settings, log, nil)
	require.NoError(t, err)
	relay := outbox.New(outbox.Config{Poll: 20 * time.Millisecond}, st, b, log)
	runs := []func(context.Context) error{acc.Run, relay.Run}
	if compact {
		provider := llm.Guard(builtin.New(map[llm.Task]builtin.Handler{llm.TaskCompaction: compaction.BuiltinSummarizer}),
			llm.GuardOptions{TracerProvider: tp})
		comp, err := compactor.New(compactor.DefaultConfig(), st, b, settings, provider, log, nil)
		require.NoError(t, err)
		runs = append(runs, comp.Run)
	}
	gw, err := gateway.New(gcfg, st, b, settings, log, nil)
	require.NoError(t, err)
	runs = append(runs, func(ctx context.Context) error { gcfg.Keys.Listen(ctx); return nil })
	mux := http.NewServeMux()
	gw.Register(mux)
	api := httptest.NewServer(telemetry.HTTPHandler(mux, tp, metrics.MeterProvider()))

	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Go(func() {
			if err := run(ctx); err != nil {
				t.Errorf("service: %v", err)
			}
		})
	}
	t.Cleanup(func() { api.Close(); gw.Drain(); cancel(); wg.Wait() })
	select {
	case <-heard:
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway does not hear of revoked keys")
	}
	return st, api, exp
}

// TestOneTraceFromIngestToCompaction posts one turn large enough to cross
// the auto-compact threshold to the gateway and follows it through the
// real services (gateway, accountant, outbox relay, compactor with the
// guarded builtin provider): HTTP ingest, publish, consume, the
// compaction's model call and compact.completed are one trace, with every
// parent link across NATS intact.
func TestOneTraceFromIngestToCompaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, api, exp := startTraced(t, true)

	// One round whose usage puts the session past 167,000 tokens.
	var msgs []turn.Message
	for i := range 6 {
		msgs = append(msgs, turn.Message{UUID: fmt.Sprintf("u%d", i), Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: fmt.Sprintf("Step %d: %s", i, strings.Repeat("read the logs and fix the build. ", 40))}}})
	}
	ev := turn.Event{
		Schema: turn.SchemaV1, EventID: "trace-1", SessionID: "traced", Seq: 1, Model: "claude-sonnet-4-5",
		ContextWindow: 200_000, MaxOutputTokens: 32_000, InputMessages: msgs, OccurredAt: time.Now().UTC(),
		Response: &turn.Message{UUID: "a1", Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: turn.BlockText, Text: "Fixed."}}},
		Usage:    &turn.Usage{InputTokens: 5, CacheReadInputTokens: 170_000, OutputTokens: 20},
	}
	body, err := json.Marshal(ev)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, api.URL+"/v1/turns", strings.NewReader(string(body)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer trace-key")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	// Wait for the compaction's span to end: a span is exported when it
	// ends, and the compactor's ends after its announcement is published.
	// The compaction's span ends as its transaction commits; the outbox
	// relay publishes compact.completed after that.
	require.Eventually(t, func() bool {
		ended := map[string]bool{}
		for _, s := range exp.GetSpans() {
			ended[s.Name] = true
		}
		return ended["process compact.requested"] && ended["publish compact.completed"]
	}, 60*time.Second, 20*time.Millisecond, "the compaction's span ended and compact.completed was published")
	sess, err := st.GetSession(ctx, "acme", "traced")
	require.NoError(t, err)
	require.NotEmpty(t, sess.CompactionID, "the session was compacted")

	all := spans(exp.GetSpans())
	ingest := all.named(t, "POST /v1/turns")
	require.Equal(t, trace.SpanKindServer, ingest.SpanKind)
	require.False(t, ingest.Parent.IsValid(), "the ingest starts the trace")

	// gateway → NATS → accountant
	pubTurn := all.named(t, "publish turn.completed")
	requireChildOf(t, pubTurn, ingest)
	consume := all.named(t, "process turn.completed")
	requireChildOf(t, consume, pubTurn)
	require.True(t, consume.Parent.IsRemote(), "the link crossed NATS in the message headers")
	all.batchedUnder(t, consume, "SessionsLockFree") // the accountant's queries (its group commit's, the lock with its reads) are in its span
	all.childNamed(t, ingest, "APIKeyLookup")        // and the gateway's in the request's

	// accountant → outbox → NATS → compactor
	pubRequest := all.named(t, "publish compact.requested")
	all.requireDescends(t, pubRequest, consume)
	compact := all.named(t, "process compact.requested")
	requireChildOf(t, compact, pubRequest)
	require.True(t, compact.Parent.IsRemote())
	require.Contains(t, compact.Attributes, attribute.String("mnemos.compaction.method", events.MethodFull), "the span is the compaction's")
	require.Contains(t, compact.Attributes, attribute.String("mnemos.compaction.id", sess.CompactionID))
	model := all.named(t, "chat builtin")
	require.Equal(t, trace.SpanKindClient, model.SpanKind)
	all.requireDescends(t, model, compact)

	// compactor → outbox → NATS
	completed := all.named(t, "publish compact.completed")
	all.requireDescends(t, completed, compact)
	all.requireDescends(t, completed, ingest)
	for _, s := range []tracetest.SpanStub{pubTurn, consume, pubRequest, compact, model, completed} {
		require.Equal(t, ingest.SpanContext.TraceID(), s.SpanContext.TraceID(), s.Name)
	}
}

// TestAContextReadAgainSkipsWhatIsDecided: what a context read decides for
// good — the memory section frozen for the session's compaction, and what
// is shown beside each user message — is read from Postgres by the first
// read of a session and not by the next, which answers the same bytes.
func TestAContextReadAgainSkipsWhatIsDecided(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, api, exp := startTraced(t, false)

	do := func(method, path, body string) []byte {
		req, err := http.NewRequest(method, api.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer trace-key")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out json.RawMessage
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		require.Less(t, resp.StatusCode, 300, "%s %s: %s", method, path, out)
		return out
	}
	// turn posts round seq of the session (the user's text, the answer)
	// and waits until it is accounted.
	turnOf := func(seq int64, text, answer string) {
		ev, err := json.Marshal(turn.Event{
			Schema: turn.SchemaV1, EventID: fmt.Sprintf("decided-%d", seq), SessionID: "decided", Seq: seq, Model: "claude-sonnet-4-5", OccurredAt: time.Now().UTC(),
			InputMessages: []turn.Message{{UUID: fmt.Sprintf("u%d", seq), Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: text}}}},
			Response:      &turn.Message{UUID: fmt.Sprintf("a%d", seq), Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: turn.BlockText, Text: answer}}},
			Usage:         &turn.Usage{InputTokens: 20 + 20*seq, OutputTokens: 5},
		})
		require.NoError(t, err)
		do(http.MethodPost, "/v1/turns", string(ev))
		require.Eventually(t, func() bool {
			s, err := st.GetSession(ctx, "acme", "decided")
			return err == nil && s.AppliedSeq == seq
		}, 30*time.Second, 20*time.Millisecond)
	}
	turnOf(1, "Read the logs and fix the build.", "Fixed.")

	// The round trips a context read made (its client spans) and the
	// queries in them (a batch's are its events).
	read := func() (body []byte, trips []string, queries map[string]bool) {
		exp.Reset()
		body = do(http.MethodGet, "/v1/sessions/decided/context", "")
		all := spans(exp.GetSpans())
		server := all.named(t, "GET /v1/sessions/{id}/context")
		queries = map[string]bool{}
		for _, sp := range all {
			if sp.SpanKind != trace.SpanKindClient || sp.SpanContext.TraceID() != server.SpanContext.TraceID() {
				continue
			}
			trips = append(trips, sp.Name)
			queries[sp.Name] = true
			for _, ev := range sp.Events {
				for _, a := range ev.Attributes {
					if a.Key == semconv.DBQuerySummaryKey {
						queries[a.Value.AsString()] = true
					}
				}
			}
		}
		return body, trips, queries
	}
	first, _, q1 := read()
	require.True(t, q1["MemorySectionGet"], "the first read reads the section: %v", q1)
	require.True(t, q1["RecallPrefetchList"], "the first read reads what is beside the user's message: %v", q1)
	again, trips, q2 := read()
	require.Equal(t, []string{"batch"}, trips, "the read again is one round trip")
	require.Equal(t, map[string]bool{"batch": true, "SELECT": true, "SessionGet": true, "MessagePage": true, "CompactionOfSession": true,
		"ReplacementsOfKinds": true, "ContextSnapshotGet": true}, q2,
		"the read again: the tenant, the session, its messages since, its compaction, its cuts and its snapshot")
	require.JSONEq(t, string(first), string(again))

	// A new turn: its messages come in the same one round trip.
	turnOf(2, "Now run the tests.", "They pass.")
	third, _, q3 := read()
	require.True(t, q3["RecallPrefetchList"], "a new user message is decided on in a transaction: %v", q3)
	fourth, trips, _ := read()
	require.Equal(t, []string{"batch"}, trips, "then it is known, and the read is one round trip again")
	require.JSONEq(t, string(third), string(fourth))
	var body struct {
		MessageUUIDs []string `json:"message_uuids"`
	}
	require.NoError(t, json.Unmarshal(fourth, &body))
	require.Equal(t, []string{"u1", "a1", "u2", "a2"}, body.MessageUUIDs)
}
