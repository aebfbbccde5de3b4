// Package faults_test runs Mnemos targets as real processes against a real
// Postgres and NATS JetStream and breaks things under them: a target killed
// between its commit and its acknowledgement, the NATS server restarted under
// load, Postgres connections terminated for a minute, the outbox relay down
// past the duplicate window, a poison message, a failing, slow or garbled
// model. Every test asserts outcomes (rows, stream contents, counters),
// never durations.
package faults_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/proctest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// bins are the mnemos binary and nats-server built once for this run.
var bins proctest.Binaries

func TestMain(m *testing.M) { proctest.Main(m, &bins) }

const (
	tenant = "acme"
	apiKey = "faults-test-key"
)

// keys are the API keys of the tenants the tests send as; a test that adds a
// tenant adds its key here too (the chaos test's second tenant).
var keys = map[string]string{tenant: apiKey, otherTenant: otherKey}

const (
	otherTenant = "globex"
	otherKey    = "faults-test-key-globex"
)

// Generous bounds for asynchronous outcomes on a busy two-core machine.
const (
	settleTimeout = 3 * time.Minute
	poll          = 100 * time.Millisecond
)

// system is one test's Mnemos: its own database, its own NATS namespace (on
// the shared test server, or on a server the test controls), and the
// environment every target it starts shares.
type system struct {
	t     *testing.T
	db    string // database name, for pg_terminate_backend
	store *store.Store
	// admin reads every tenant's rows, for the checks (the services' role
	// sees none outside a tenant's transaction).
	admin *pgxpool.Pool
	bus   *bus.Bus // the test's own connection, in the same namespace
	env   map[string]string
}

type systemOptions struct {
	// natsURL is a server the test controls; empty: the shared test server.
	natsURL string
	// duplicateWindow of the streams; 0: the default.
	duplicateWindow time.Duration
	// settings are the tenant's settings document.
	settings string
	// replicas of every stream (a cluster's natsURL); 0: one.
	replicas int
}

func newSystem(t *testing.T, opts systemOptions) *system {
	t.Helper()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	st, err := store.Open(ctx, store.Config{URL: dbURL, MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.EnsureTenant(ctx, tenant, "Acme"))
	require.NoError(t, st.AddAPIKey(ctx, tenant, "faults", apiKey))
	if opts.settings != "" {
		require.NoError(t, st.SetTenantSettings(ctx, tenant, []byte(opts.settings)))
	}
	var db string
	require.NoError(t, st.Pool().QueryRow(ctx, "SELECT current_database()").Scan(&db))

	cfg := bustest.Config(t)
	if opts.natsURL != "" {
		cfg.URL = opts.natsURL
		cfg.Namespace = "f" + strings.ToLower(rand.Text()[:10])
	}
	cfg.DuplicateWindow = opts.duplicateWindow
	cfg.Replicas = opts.replicas
	b := bustest.Connect(t, cfg)

	env := map[string]string{
		"MNEMOS_DATABASE_URL":       dbURL,
		"MNEMOS_DATABASE_MAX_CONNS": "6", // the Postgres is shared with every other test
		"MNEMOS_MIGRATE":            "false",
		"MNEMOS_NATS_URL":           cfg.URL,
		"MNEMOS_NAMESPACE":          cfg.Namespace,
		"MNEMOS_DEV_API_KEY":        "off",
		"MNEMOS_WORKERS":            "8",
		// A killed accountant's unacknowledged events come back after the
		// ack wait (30 s); the default gap timeout is as long, and on a busy
		// machine the sweep could give up on them first.
		"MNEMOS_GAP_TIMEOUT": "5m",
	}
	if opts.duplicateWindow > 0 {
		env["MNEMOS_NATS_DUPLICATE_WINDOW"] = opts.duplicateWindow.String()
	}
	if opts.replicas > 0 {
		env["MNEMOS_STREAM_REPLICAS"] = fmt.Sprint(opts.replicas)
	}
	return &system{t: t, db: db, store: st, admin: pgtest.Admin(t, st), bus: b, env: env}
}

// start runs `mnemos -target=<target>` with the system's environment and env.
func (s *system) start(target string, env map[string]string) *proctest.Process {
	s.t.Helper()
	full := map[string]string{}
	for k, v := range s.env {
		full[k] = v
	}
	for k, v := range env {
		full[k] = v
	}
	return proctest.Mnemos(s.t, bins, target, full, "-target="+target)
}

// publish sends an event straight to NATS, as a backend may.
func (s *system) publish(ctx context.Context, ev turn.Event) (*jetstream.PubAck, error) {
	data, err := turn.Marshal(ev)
	if err != nil {
		return nil, err
	}
	return s.bus.Publish(ctx, s.bus.Subject(bus.KindTurnCompleted, tenant, ev.SessionID), ev.EventID, data, nil)
}

// post sends an event to a gateway's POST /v1/turns and returns the status
// (0 when no answer came).
func post(ctx context.Context, gateway *proctest.Process, ev turn.Event) int {
	data, err := turn.Marshal(ev)
	if err != nil {
		return 0
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, gateway.URL()+"/v1/turns", bytes.NewReader(data))
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+keys[cmp.Or(ev.TenantID, tenant)])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// waitApplied waits until every session has applied (or moved past) its
// last seq. Sessions are the tenant's, unless of is given: each session's.
func (s *system) waitApplied(want map[string]int64, of ...map[string]string) {
	s.t.Helper()
	tenantOf := func(id string) string {
		if len(of) > 0 {
			return of[0][id]
		}
		return tenant
	}
	require.Eventually(s.t, func() bool {
		for id, seq := range want {
			sess, err := s.store.GetSession(context.Background(), tenantOf(id), id)
			if err != nil || sess.AppliedSeq < seq {
				return false
			}
		}
		return true
	}, settleTimeout, poll, "sessions did not apply every event")
}

// waitOutboxEmpty waits until the relays published every outbox row.
func (s *system) waitOutboxEmpty() {
	s.t.Helper()
	require.Eventually(s.t, func() bool {
		n, err := s.store.OutboxBacklog(context.Background())
		return err == nil && n == 0
	}, settleTimeout, poll, "the outbox was not drained")
}

// waitConsumerSettled waits until a durable consumer has acknowledged
// every message of its stream: nothing pending, nothing waiting for an ack.
func (s *system) waitConsumerSettled(stream, durable string) {
	s.t.Helper()
	require.Eventually(s.t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := s.bus.JetStream().Consumer(ctx, s.bus.StreamName(stream), durable)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.NumRedelivered == 0
	}, settleTimeout, poll, "consumer %s did not acknowledge every message", durable)
}

// count runs a count query of the test's checks.
func (s *system) count(query string, args ...any) int64 {
	s.t.Helper()
	var n int64
	require.NoError(s.t, s.admin.QueryRow(context.Background(), query, args...).Scan(&n), query)
	return n
}

// msgIDs reads every message of a stream on subjects matching filter
// (unprefixed) and counts them by Nats-Msg-Id.
func (s *system) msgIDs(stream, filter string) map[string]int {
	s.t.Helper()
	ids := map[string]int{}
	for _, m := range s.streamMsgs(stream, filter) {
		ids[m.Headers().Get(jetstream.MsgIDHeader)]++
	}
	return ids
}

// streamMsgs reads every message of a stream on subjects matching filter
// (unprefixed), in stream order.
func (s *system) streamMsgs(stream, filter string) []jetstream.Msg {
	s.t.Helper()
	return s.readStream(stream, s.bus.Prefix(filter))
}

// readStream reads every message of a stream (on subjects matching filter,
// prefixed; empty: all), in stream order. A cluster that just lost a node
// elects its leaders for a few seconds and answers no request meanwhile:
// a read that fails is tried again, from the start, for settleTimeout.
func (s *system) readStream(stream, filter string) []jetstream.Msg {
	s.t.Helper()
	read := func() ([]jetstream.Msg, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		st, err := s.bus.JetStream().Stream(ctx, s.bus.StreamName(stream))
		if err != nil {
			return nil, err
		}
		// A plain pull consumer of its own, not an ordered one: after the
		// chaos schedule's node kills, ordered consumers placed on some
		// nodes failed every read with "no responders" while the stream
		// and every other consumer served.
		cfg := jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute}
		if filter != "" {
			cfg.FilterSubject = filter // one subject: the servers before 2.10 take no list
		}
		c, err := st.CreateConsumer(ctx, cfg)
		if err != nil {
			return nil, err
		}
		defer func() { _ = st.DeleteConsumer(context.Background(), c.CachedInfo().Name) }()
		info, err := c.Info(ctx)
		if err != nil {
			return nil, err
		}
		var out []jetstream.Msg
		for uint64(len(out)) < info.NumPending {
			batch, err := c.Fetch(int(min(info.NumPending-uint64(len(out)), 500)), jetstream.FetchMaxWait(10*time.Second))
			if err != nil {
				return nil, err
			}
			n := len(out)
			for m := range batch.Messages() {
				out = append(out, m)
			}
			if err := batch.Error(); err != nil {
				return nil, err
			}
			if len(out) == n {
				return nil, fmt.Errorf("%d of %d messages read, then none", n, info.NumPending)
			}
		}
		return out, nil
	}
	deadline := time.Now().Add(settleTimeout)
	for {
		out, err := read()
		if err == nil {
			return out
		}
		require.True(s.t, time.Now().Before(deadline), "reading stream %s: %v", stream, err)
		s.t.Logf("reading stream %s failed, trying again: %v", stream, err)
		time.Sleep(time.Second)
	}
}

// deadLetters returns the dead letters' reasons by original message id.
func (s *system) deadLetters() map[string]string {
	s.t.Helper()
	out := map[string]string{}
	for id, m := range s.deadLetterMsgs() {
		out[id] = m.Headers().Get(bus.HeaderDeadLetterReason)
	}
	return out
}

// eventOptions shape a generated session.
type eventOptions struct {
	// window and maxOutput are what the events report (0: left out).
	window, maxOutput int64
	// resultBytes is the size of each round's tool result.
	resultBytes int
	// usage: rounds report usage growing by the estimate; else none (the
	// count is the estimate × 4/3).
	usage bool
	// firstInput, when set, is the first round's usage input side: a
	// session that starts large.
	firstInput int64
	// tenant of the events; empty: tenant.
	tenant string
}

// session makes n rounds of an agent working through tool calls: each round
// a tool result (the first a user request) and a response calling the next
// tool. Event ids are "<session>-<seq>".
func session(id string, n int, o eventOptions) []turn.Event {
	if o.resultBytes == 0 {
		o.resultBytes = 400
	}
	evs := make([]turn.Event, 0, n)
	input := o.firstInput
	for seq := 1; seq <= n; seq++ {
		var in turn.Message
		if seq == 1 {
			in = turn.Message{UUID: fmt.Sprintf("%s-u%d", id, seq), Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: "Please get the build green again, " + id + "."}}}
		} else {
			result := turn.Content{{Type: turn.BlockText, Text: filler(fmt.Sprintf("%s round %d", id, seq), o.resultBytes)}}
			in = turn.Message{UUID: fmt.Sprintf("%s-u%d", id, seq), Role: "user", Content: turn.Content{
				{Type: turn.BlockToolResult, ToolUseID: fmt.Sprintf("%s-t%d", id, seq-1), Content: &result},
			}}
		}
		resp := turn.Message{UUID: fmt.Sprintf("%s-a%d", id, seq), Role: "assistant", StopReason: "tool_use", Content: turn.Content{
			{Type: turn.BlockText, Text: "Running the next step."},
			{Type: turn.BlockToolUse, ID: fmt.Sprintf("%s-t%d", id, seq), Name: "Bash", Input: json.RawMessage(`{"command":"make test"}`)},
		}}
		ev := turn.Event{
			Schema: turn.SchemaV1, EventID: fmt.Sprintf("%s-%d", id, seq), TenantID: cmp.Or(o.tenant, tenant), SessionID: id, Seq: int64(seq),
			Model: "claude-sonnet-4-5", ContextWindow: o.window, MaxOutputTokens: o.maxOutput,
			InputMessages: []turn.Message{in}, Response: &resp,
			OccurredAt: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).Add(time.Duration(seq) * time.Second),
		}
		if o.usage {
			input += int64(len(filler("", o.resultBytes))/4) + 30
			ev.Usage = &turn.Usage{InputTokens: 3, CacheReadInputTokens: input, OutputTokens: 40}
		}
		evs = append(evs, ev)
	}
	return evs
}

// filler is n bytes of readable text.
func filler(seed string, n int) string {
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, "%s: line %d of the output. ", seed, b.Len())
	}
	return b.String()[:n]
}
