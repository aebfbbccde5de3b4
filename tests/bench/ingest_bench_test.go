// Package bench measures Mnemos end to end on the machine it runs on, next
// to the raw speed of the same machine's JetStream and Postgres, so the
// figures can be read as ratios rather than absolutes.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/bus/bustest"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

const (
	turnsPerRound = 2_000 // turn events per measured round
	sessions      = 100
	publishers    = 8
)

// BenchmarkIngest measures, per round, turns/s from publish to committed and
// accounted (turn.accounted seen on the bus), the raw JetStream publish+consume
// rate and the raw Postgres insert rate, and reports the medians and ratios.
func BenchmarkIngest(b *testing.B) {
	st, bb := startSystem(b)
	var e2e, js, pg, latP50, latP99 []float64
	payloadSize := 0
	for i := 0; b.Loop(); i++ {
		evs := makeEvents(i, sessions, turnsPerRound/sessions)
		payloadSize = len(mustJSON(b, evs[0]))
		rate, p50, p99 := runE2E(b, bb, evs)
		e2e, latP50, latP99 = append(e2e, rate), append(latP50, p50), append(latP99, p99)
		js = append(js, runRawJetStream(b, bb, i, payloadSize))
		pg = append(pg, runRawPostgres(b, st, payloadSize))
	}
	m := median(e2e)
	b.ReportMetric(m, "turns/s")
	b.ReportMetric(median(latP50), "p50-ms")
	b.ReportMetric(median(latP99), "p99-ms")
	b.ReportMetric(median(js), "js-msgs/s")
	b.ReportMetric(median(pg), "pg-inserts/s")
	b.ReportMetric(m/median(js), "ratio-js")
	b.ReportMetric(m/median(pg), "ratio-pg")
	b.Logf("ingest end to end: %.0f turns/s (p50 %.1f ms, p99 %.1f ms ingest to accounted); raw JetStream publish+consume %.0f msgs/s; raw Postgres insert %.0f rows/s; ratios %.2f of JetStream, %.2f of Postgres (median of %d rounds of %d turns, %d-byte events)",
		m, median(latP50), median(latP99), median(js), median(pg), m/median(js), m/median(pg), len(e2e), turnsPerRound, payloadSize)
}

// startSystem runs the accountant and the outbox relay on a real Postgres and
// JetStream until tb ends.
func startSystem(tb testing.TB) (*store.Store, *bus.Bus) {
	ctx, cancel := context.WithCancel(context.Background())
	st := pgtest.New(tb)
	bb := bustest.New(tb)
	log := bustest.Logger(tb)
	require.NoError(tb, st.EnsureTenant(ctx, "bench", "bench"))
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, 30*time.Second)
	require.NoError(tb, err)
	svc, err := tokenaccounting.New(tokenaccounting.DefaultConfig(), st, bb, settings, log, nil)
	require.NoError(tb, err)
	relay := outbox.New(outbox.DefaultConfig(), st, bb, log)
	var wg sync.WaitGroup
	wg.Go(func() { _ = svc.Run(ctx) })
	wg.Go(func() { _ = relay.Run(ctx) })
	tb.Cleanup(func() { cancel(); wg.Wait() })
	return st, bb
}

// TestIngestRoundEndToEnd runs one small round of the benchmark as a test, so
// the harness cannot rot: every turn is accounted, and each session ends at
// its last response's usage.
func TestIngestRoundEndToEnd(t *testing.T) {
	t.Parallel()
	st, bb := startSystem(t)
	evs := makeEvents(0, 10, 20)
	rate, p50, p99 := runE2E(t, bb, evs)
	require.Positive(t, rate)
	require.LessOrEqual(t, p50, p99)
	for _, ev := range evs[len(evs)-10:] {
		s, err := st.GetSession(context.Background(), "bench", ev.SessionID)
		require.NoError(t, err)
		var want tokens.Tally
		want.SetResponse(*ev.Usage, ev.Response.Content)
		require.Equal(t, want.Count(), s.TokenCount, ev.SessionID)
		require.EqualValues(t, 20, s.AppliedSeq)
	}
}

// makeEvents builds one round of turns: sessions × perSession, each a tool
// call and its result, as an agent backend sends them.
func makeEvents(round, sessions, perSession int) []turn.Event {
	evs := make([]turn.Event, 0, sessions*perSession)
	result := turn.Content{{Type: "text", Text: strings.Repeat("build output line\n", 40)}}
	for seq := 1; seq <= perSession; seq++ {
		for s := range sessions {
			id := fmt.Sprintf("r%d-s%d", round, s)
			evs = append(evs, turn.Event{
				Schema: turn.SchemaV1, EventID: fmt.Sprintf("%s-%d", id, seq), TenantID: "bench", SessionID: id, Seq: int64(seq),
				Model: "claude-sonnet-4-5", OccurredAt: time.Now().UTC(),
				InputMessages: []turn.Message{{UUID: fmt.Sprintf("%s-u%d", id, seq), Role: "user", Content: turn.Content{
					{Type: "tool_result", ToolUseID: fmt.Sprintf("%s-t%d", id, seq-1), Content: &result},
				}}},
				Response: &turn.Message{UUID: fmt.Sprintf("%s-a%d", id, seq), Role: "assistant", StopReason: "tool_use", Content: turn.Content{
					{Type: "text", Text: "Running the tests again."},
					{Type: "tool_use", ID: fmt.Sprintf("%s-t%d", id, seq), Name: "Bash", Input: json.RawMessage(`{"command":"go test ./..."}`)},
				}},
				Usage: &turn.Usage{InputTokens: 3, CacheCreationInputTokens: 400, CacheReadInputTokens: int64(20_000 + 500*seq), OutputTokens: 60},
			})
		}
	}
	return evs
}

func runE2E(b testing.TB, bb *bus.Bus, evs []turn.Event) (rate, p50, p99 float64) {
	ctx := context.Background()
	sent := sync.Map{}
	var seen atomic.Int64
	lat := make([]float64, 0, len(evs))
	var latMu sync.Mutex
	done := make(chan struct{})
	sub, err := bb.Conn().Subscribe(bb.Prefix(bus.KindTurnAccounted+".>"), func(m *nats.Msg) {
		var acc struct {
			EventID string `json:"event_id"`
		}
		if json.Unmarshal(m.Data, &acc) != nil {
			return
		}
		if t0, ok := sent.Load(acc.EventID); ok {
			latMu.Lock()
			lat = append(lat, float64(time.Since(t0.(time.Time)).Microseconds())/1000)
			latMu.Unlock()
			if seen.Add(1) == int64(len(evs)) {
				close(done)
			}
		}
	})
	require.NoError(b, err)
	defer sub.Unsubscribe() //nolint:errcheck // the benchmark is over either way

	encoded := make([][]byte, len(evs))
	for i, ev := range evs {
		encoded[i] = mustJSON(b, ev)
	}
	start := time.Now()
	var next atomic.Int64
	var pw sync.WaitGroup
	for range publishers {
		pw.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(evs) {
					return
				}
				ev := evs[i]
				sent.Store(ev.EventID, time.Now())
				if _, err := bb.Publish(ctx, bb.Subject(bus.KindTurnCompleted, ev.TenantID, ev.SessionID), ev.EventID, encoded[i], nil); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	pw.Wait()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d turns accounted", seen.Load(), len(evs))
	}
	elapsed := time.Since(start)
	slices.Sort(lat)
	return float64(len(evs)) / elapsed.Seconds(), lat[len(lat)/2], lat[len(lat)*99/100]
}

// runRawJetStream publishes and consumes the same number of same-sized
// messages through one stream, with the same publisher concurrency.
func runRawJetStream(b *testing.B, bb *bus.Bus, round, size int) float64 {
	ctx := context.Background()
	js := bb.JetStream()
	name := bb.StreamName(fmt.Sprintf("RAWBENCH%d", round))
	subject := bb.Prefix(fmt.Sprintf("rawbench.%d", round))
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Storage: jetstream.FileStorage})
	require.NoError(b, err)
	defer js.DeleteStream(ctx, name) //nolint:errcheck // best effort
	cons, err := js.CreateOrUpdateConsumer(ctx, name, jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(b, err)
	data := []byte(strings.Repeat("x", size))
	var got atomic.Int64
	done := make(chan struct{})
	start := time.Now()
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if err := m.Ack(); err != nil {
			b.Error(err)
		}
		if got.Add(1) == turnsPerRound {
			close(done)
		}
	})
	require.NoError(b, err)
	defer cc.Stop()
	var next atomic.Int64
	var pw sync.WaitGroup
	for range publishers {
		pw.Go(func() {
			for next.Add(1) <= turnsPerRound {
				if _, err := js.Publish(ctx, subject, data); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	pw.Wait()
	<-done
	return turnsPerRound / time.Since(start).Seconds()
}

// runRawPostgres inserts the same number of same-sized rows, one committed
// transaction each, with the same concurrency.
func runRawPostgres(b *testing.B, st *store.Store, size int) float64 {
	ctx := context.Background()
	// The services' role may not create tables: the administrator makes it
	// and lets the role insert, through the same pool the services use.
	_, err := pgtest.Admin(b, st).Exec(ctx, "CREATE TABLE IF NOT EXISTS rawbench (id bigserial PRIMARY KEY, payload bytea NOT NULL); "+
		"GRANT INSERT ON rawbench TO "+store.AppRole+"; GRANT USAGE ON SEQUENCE rawbench_id_seq TO "+store.AppRole)
	require.NoError(b, err)
	pool := st.Pool()
	data := []byte(strings.Repeat("x", size))
	start := time.Now()
	var next atomic.Int64
	var pw sync.WaitGroup
	for range publishers {
		pw.Go(func() {
			for next.Add(1) <= turnsPerRound {
				if _, err := pool.Exec(ctx, "INSERT INTO rawbench (payload) VALUES ($1)", data); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	pw.Wait()
	return turnsPerRound / time.Since(start).Seconds()
}

func mustJSON(b testing.TB, v any) []byte {
	data, err := json.Marshal(v)
	require.NoError(b, err)
	return data
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
