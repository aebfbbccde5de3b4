package benchmark

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Events makes one round of turns, sessions × perSession: each a tool result
// and a response calling the next tool, as an agent backend sends them, in
// seq order per session and interleaved across sessions. run keeps the ids
// of different rounds apart.
func Events(run string, sessions, perSession int) []turn.Event {
	evs := make([]turn.Event, 0, sessions*perSession)
	result := turn.Content{{Type: turn.BlockText, Text: strings.Repeat("build output line\n", 40)}}
	for seq := 1; seq <= perSession; seq++ {
		for s := range sessions {
			id := fmt.Sprintf("%s-s%d", run, s)
			evs = append(evs, turn.Event{
				Schema: turn.SchemaV1, EventID: fmt.Sprintf("%s-%d", id, seq), TenantID: Tenant, SessionID: id, Seq: int64(seq),
				Model: "claude-sonnet-4-5", OccurredAt: time.Now().UTC(),
				InputMessages: []turn.Message{{UUID: fmt.Sprintf("%s-u%d", id, seq), Role: "user", Content: turn.Content{
					{Type: turn.BlockToolResult, ToolUseID: fmt.Sprintf("%s-t%d", id, seq-1), Content: &result},
				}}},
				Response: &turn.Message{UUID: fmt.Sprintf("%s-a%d", id, seq), Role: "assistant", StopReason: "tool_use", Content: turn.Content{
					{Type: turn.BlockText, Text: "Running the tests again."},
					{Type: turn.BlockToolUse, ID: fmt.Sprintf("%s-t%d", id, seq), Name: "Bash", Input: json.RawMessage(`{"command":"go test ./..."}`)},
				}},
				Usage: &turn.Usage{InputTokens: 3, CacheCreationInputTokens: 400, CacheReadInputTokens: int64(20_000 + 500*seq), OutputTokens: 60},
			})
		}
	}
	return evs
}

// Ingest is one measured ingest run.
type Ingest struct {
	Turns int
	// Rate is turns accounted per second, from the first publish to the last
	// turn.accounted.
	Rate float64
	// Latencies are, per turn, the time from its publish to its
	// turn.accounted on the bus: received, applied and committed in
	// Postgres, relayed through the outbox.
	Latencies []time.Duration
	// Offered is the publish rate asked for (0: as fast as possible).
	Offered float64
	// EventBytes is the size of one encoded event.
	EventBytes int
	// CPU is where the machine's CPU went from the first publish to the
	// last turn.accounted, when HasCPU (/proc could be read).
	CPU    CPU
	HasCPU bool
}

// Turns are turn events encoded to publish, and nothing else of them. A
// run's events live in the heap of the system it measures: held decoded,
// the sustained run's (half a million pointers) made each of the system's
// garbage collections mark them, and each collection a stall of tens of
// milliseconds.
type Turns struct {
	msgs  []turnMsg
	index map[string]int // event id → position
}

type turnMsg struct {
	subject, id string
	data        []byte
}

// Len is how many turns there are.
func (t Turns) Len() int { return len(t.msgs) }

// Encode encodes evs to publish on s's bus. Call it on its own line, not
// inside the call that ingests them: the decoded events then die here.
func (s *System) Encode(evs []turn.Event) (Turns, error) {
	t := Turns{msgs: make([]turnMsg, len(evs)), index: make(map[string]int, len(evs))}
	for i := range evs {
		data, err := turn.Marshal(evs[i])
		if err != nil {
			return Turns{}, fmt.Errorf("benchmark: %w", err)
		}
		t.msgs[i] = turnMsg{s.Bus.Subject(bus.KindTurnCompleted, evs[i].TenantID, evs[i].SessionID), evs[i].EventID, data}
		t.index[evs[i].EventID] = i
	}
	return t, nil
}

// IngestBurst publishes t to JetStream from publishers goroutines as fast
// as they go and waits until every one is accounted.
func (s *System) IngestBurst(ctx context.Context, t Turns, publishers int) (Ingest, error) {
	return s.ingest(ctx, t, publishers, 0)
}

// IngestAtRate publishes t at rate events a second, evenly spaced, and
// waits until every one is accounted: the latency of a system that keeps up.
func (s *System) IngestAtRate(ctx context.Context, t Turns, rate float64) (Ingest, error) {
	return s.ingest(ctx, t, 0, rate)
}

func (s *System) ingest(ctx context.Context, t Turns, publishers int, rate float64) (Ingest, error) {
	n := t.Len()
	out := Ingest{Turns: n, Offered: rate}
	if n == 0 {
		return out, nil
	}
	out.EventBytes = len(t.msgs[0].data)

	sent := make([]atomic.Int64, n) // unix nanoseconds of each publish
	var (
		mu   sync.Mutex
		seen = make([]bool, n)
		lat  = make([]time.Duration, 0, n)
		last time.Time
		done = make(chan struct{})
	)
	sub, err := s.Bus.Conn().Subscribe(s.Bus.Prefix(bus.KindTurnAccounted+".>"), func(m *nats.Msg) {
		var acc struct {
			EventID string `json:"event_id"`
		}
		if json.Unmarshal(m.Data, &acc) != nil {
			return
		}
		i, ok := t.index[acc.EventID]
		if !ok {
			return
		}
		at := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if seen[i] {
			return
		}
		seen[i] = true
		lat = append(lat, at.Sub(time.Unix(0, sent[i].Load())))
		last = at
		if len(lat) == n {
			close(done)
		}
	})
	if err != nil {
		return out, fmt.Errorf("benchmark: subscribe: %w", err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // the run is over either way
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = s.Bus.Conn().FlushWithContext(fctx) // the subscription is in place before the first publish
	cancel()
	if err != nil {
		return out, fmt.Errorf("benchmark: %w", err)
	}

	publish := func(i int) error {
		sent[i].Store(time.Now().UnixNano())
		_, err := s.Bus.Publish(ctx, t.msgs[i].subject, t.msgs[i].id, t.msgs[i].data, nil)
		return err
	}
	cpu := sampleCPU()
	start := time.Now()
	var perr error
	if rate > 0 {
		perr = paced(ctx, n, rate, publish)
	} else {
		perr = parallel(n, publishers, publish)
	}
	if perr != nil {
		return out, fmt.Errorf("benchmark: publish: %w", perr)
	}
	select {
	case <-done:
	case <-ctx.Done():
		return out, ctx.Err()
	case <-time.After(5 * time.Minute):
		mu.Lock()
		n := len(lat)
		mu.Unlock()
		return out, fmt.Errorf("benchmark: only %d of %d turns accounted within 5 minutes", n, n)
	}
	out.CPU, out.HasCPU = cpuSince(cpu)
	mu.Lock()
	defer mu.Unlock()
	out.Rate = float64(n) / last.Sub(start).Seconds()
	out.Latencies = lat
	return out, nil
}

// parallel calls f(0..n-1) from workers goroutines; the first error stops it.
func parallel(n, workers int, f func(int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// paced calls f(0..n-1) at rate calls a second, each at its own moment,
// several at once when one is slow, so a slow publish does not slow the rate.
func paced(ctx context.Context, n int, rate float64, f func(int) error) error {
	start := time.Now()
	interval := time.Duration(float64(time.Second) / rate)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return ctx.Err()
			case err := <-errc:
				wg.Wait()
				return err
			case <-time.After(d):
			}
		}
		wg.Go(func() {
			if err := f(i); err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}
