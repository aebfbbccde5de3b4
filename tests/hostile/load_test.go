package hostile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/proctest"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// The two tenants: A is hostile, B an ordinary neighbour.
const (
	tenantA = "hostile"
	keyA    = "hostile-test-key"
	tenantB = "neighbour"
	keyB    = "neighbour-test-key"
)

// Tenant A's limits. Turns keep the defaults (10,000 messages, 8 MiB); the
// session is capped at 30,000 messages instead of 100,000 so the fill takes
// seconds, not minutes. The largest session A may hold is therefore 30,000
// messages, filled by three turns of 10,000; the largest turn is 10,000
// messages in just under 8 MiB.
const (
	turnMessages    = 10_000
	turnBytes       = 8 << 20
	sessionMessages = 30_000
)

// settingsA are tenant A's settings: its limits, and no background model
// work (notes, extraction), so what the test measures is the API's.
var settingsA = fmt.Sprintf(`{"limits":{"turn_messages":%d,"turn_bytes":%d,"session_messages":%d},
	"session_memory":{"enabled":false},"extraction":{"enabled":false}}`, turnMessages, turnBytes, sessionMessages)

// The bounds the test asserts.
const (
	storm        = 200              // concurrent requests of tenant A
	answerWithin = 10 * time.Second // every one of them answered within
	maxPeakRSS   = 1 << 30          // the process's peak resident set
	// B's context p99 during the storms ÷ its p99 at rest, each over the
	// samples of all the storms a test makes and of the rests before them
	// (restSamples in all). The goal is goalSlowdown: on two quiet cores,
	// with heavy renders and body reads paced on threads of their own
	// (cpu.Apart) and the accountant's large events at the lowest
	// priority (cpu.Background), the context storm slowed B by 1.6–2.8
	// and the turn storm by 3.0 (4.8 with the accountant's work at the
	// ordinary priority too); with two other processes keeping both cores
	// busy, by 1.6 and 1.7, every request answered within 1 s. On a disk that
	// flushes half as fast the turn storm slows B by 2.5–7.6: the disk
	// sets that, not the code. The test fails past maxSlowdown, a
	// neighbour slowed by an order of magnitude, and logs whether the goal
	// was met.
	goalSlowdown = 3.0
	maxSlowdown  = 10.0
	restSamples  = 900
	killAbove    = int64(3 << 30) // the process is killed past this RSS, to spare the machine
	readyEvery   = 100 * time.Millisecond
	settle       = 3 * time.Minute // ingest of the fill on a busy machine
)

// system is the Mnemos process under test and the store the checks read.
type system struct {
	t     *testing.T
	proc  *proctest.Process
	store *store.Store
}

func newSystem(t *testing.T) *system {
	t.Helper()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	st, err := store.Open(ctx, store.Config{URL: dbURL, MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.EnsureTenant(ctx, tenantA, "Hostile"))
	require.NoError(t, st.AddAPIKey(ctx, tenantA, "hostile", keyA))
	require.NoError(t, st.SetTenantSettings(ctx, tenantA, []byte(settingsA)))
	require.NoError(t, st.EnsureTenant(ctx, tenantB, "Neighbour"))
	require.NoError(t, st.AddAPIKey(ctx, tenantB, "neighbour", keyB))

	// The embedded NATS, as a single-process deployment runs it: its 8 MiB
	// max payload lets the largest turn through.
	proc := proctest.Mnemos(t, bins, "all", map[string]string{
		"MNEMOS_DATABASE_URL":       dbURL,
		"MNEMOS_DATABASE_MAX_CONNS": "10",
		"MNEMOS_MIGRATE":            "false",
		"MNEMOS_NATS_STORE_DIR":     t.TempDir(),
		"MNEMOS_DEV_API_KEY":        "off",
	}, "-target=all")
	return &system{t: t, proc: proc, store: st}
}

// client is an HTTP client with room for a whole storm's connections.
func client(timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 2*storm, 2*storm
	return &http.Client{Transport: tr, Timeout: timeout}
}

// do sends one request and reads the whole answer; status 0 means no answer.
func do(ctx context.Context, c *http.Client, method, url, key string, body io.Reader, size int64) (int, []byte, error) {
	var data []byte
	code, err := roundTrip(ctx, c, method, url, key, body, size, func(r io.Reader) (err error) {
		data, err = io.ReadAll(r)
		return err
	})
	return code, data, err
}

// discard sends one of the storm's requests and reads its answer without
// keeping it: the test process, where B's requests are timed too, does not
// collect A's answers of megabytes.
func discard(ctx context.Context, c *http.Client, method, url, key string, body io.Reader, size int64) (int, error) {
	return roundTrip(ctx, c, method, url, key, body, size, func(r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		return err
	})
}

// expectAbove is the body size from which a request asks "Expect:
// 100-continue", as curl does for a large upload: the gateway refuses a body
// it will not take before reading any of it, and with the header the client
// learns so before sending it. Without it, a refused client still uploading
// when net/http closes the connection (half a second after the answer) is
// reset, and may lose the answer: seen for 3 to 12 of a storm's 200 turns of
// 8 MiB on two cores. Mnemos does not read a refused body to keep the
// connection; not reading it is what the refusal saves.
const expectAbove = 1 << 20

func roundTrip(ctx context.Context, c *http.Client, method, url, key string, body io.Reader, size int64, read func(io.Reader) error) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.ContentLength = size
		req.Header.Set("Content-Type", "application/json")
		if size > expectAbove {
			req.Header.Set("Expect", "100-continue")
		}
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if err := read(resp.Body); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// event is one turn of n tiny messages, or of n messages of text bytes each.
func event(tenant, session string, seq int64, n, text int) turn.Event {
	msgs := make([]turn.Message, n)
	for i := range msgs {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		body := "m"
		if text > 0 {
			body = strings.Repeat("x", text)
		}
		msgs[i] = turn.Message{UUID: fmt.Sprintf("%s-%d-%d", session, seq, i), Role: role, Content: turn.Content{{Type: turn.BlockText, Text: body}}}
	}
	// The turn ends with a tool call: it does not close a user turn, so no
	// background work follows it.
	msgs[n-1] = turn.Message{UUID: fmt.Sprintf("%s-%d-r", session, seq), Role: "assistant", StopReason: "tool_use", Content: turn.Content{
		{Type: turn.BlockText, Text: "next"},
		{Type: turn.BlockToolUse, ID: fmt.Sprintf("%s-t%d", session, seq), Name: "Bash", Input: json.RawMessage(`{"command":"true"}`)},
	}}
	return turn.Event{
		Schema: turn.SchemaV1, EventID: fmt.Sprintf("%s-%d", session, seq), TenantID: tenant, SessionID: session, Seq: seq,
		// A window no count reaches: the session is rendered whole, never compacted.
		Model: "claude-sonnet-4-5", ContextWindow: 1_000_000,
		InputMessages: msgs[:n-1], Response: &msgs[n-1],
		OccurredAt: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).Add(time.Duration(seq) * time.Second),
	}
}

// fill sends a session's turns in order, each until accepted, and waits
// until the accountant stored every message.
func (s *system) fill(tenant, key, session string, evs []turn.Event) {
	s.t.Helper()
	c := client(time.Minute)
	var want int64
	for _, ev := range evs {
		data, err := turn.Marshal(ev)
		require.NoError(s.t, err)
		want += int64(len(ev.Messages()))
		var last string
		require.Eventually(s.t, func() bool {
			code, body, err := do(context.Background(), c, http.MethodPost, s.proc.URL()+"/v1/turns", key, bytes.NewReader(data), int64(len(data)))
			last = fmt.Sprintf("%d %s %v", code, body, err)
			return code == http.StatusAccepted
		}, settle, 200*time.Millisecond, "turn %s was not accepted: %s", ev.EventID, &last)
	}
	require.Eventually(s.t, func() bool {
		sess, err := s.store.GetSession(context.Background(), tenant, session)
		return err == nil && sess.MessageCount == want && sess.AppliedSeq == evs[len(evs)-1].Seq
	}, settle, 200*time.Millisecond, "session %s was not accounted", session)
}

// samples are request durations.
type samples []time.Duration

// p99 is the nearest-rank 99th percentile.
func (d samples) p99() time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(math.Ceil(0.99*float64(len(s))))-1]
}

// readContext is B's context request: it must answer 200.
func (s *system) readContext(c *http.Client, key, session string) (time.Duration, error) {
	start := time.Now()
	code, body, err := do(context.Background(), c, http.MethodGet, s.proc.URL()+"/v1/sessions/"+session+"/context", key, nil, 0)
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("context of %s: %d %s", session, code, body)
	}
	return time.Since(start), nil
}

// outcome is one storm request's answer.
type outcome struct {
	status int
	took   time.Duration
	err    error
}

// watch runs beside a storm: it polls /readyz and the process's peak RSS
// (killing the process past killAbove) until stop is closed.
type watch struct {
	notReady atomic.Int64
	polls    atomic.Int64
	peak     atomic.Int64
	killed   atomic.Bool
	lastErr  atomic.Value
}

func (s *system) watch(stop <-chan struct{}) (*watch, *sync.WaitGroup) {
	w := &watch{}
	var wg sync.WaitGroup
	ready := client(5 * time.Second)
	wg.Go(func() {
		for {
			code, body, err := do(context.Background(), ready, http.MethodGet, s.proc.URL()+"/readyz", "", nil, 0)
			w.polls.Add(1)
			if code != http.StatusOK {
				w.notReady.Add(1)
				w.lastErr.Store(fmt.Sprintf("readyz: %d %s %v", code, body, err))
			}
			select {
			case <-stop:
				return
			case <-time.After(readyEvery):
			}
		}
	})
	wg.Go(func() {
		for {
			if rss, err := s.proc.PeakRSS(); err == nil {
				w.peak.Store(rss)
				if rss > killAbove && !w.killed.Swap(true) {
					s.proc.Kill()
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	return w, &wg
}

// stormResult is what one storm measured.
type stormResult struct {
	outcomes  []outcome
	rest      samples
	during    samples
	peakRSS   int64
	notReady  int64
	polls     int64
	killed    bool
	neighbour error
	lastReady string
}

// stormShape is how a test storms.
type stormShape struct {
	// rounds is how many storms; B's slowdown is taken over all of them.
	rounds int
	// warm opens A's connections before each storm: the storm is then of
	// requests, and the handshakes of 200 new connections, which would
	// measure the kernel and this test process, are not in it. A refused
	// turn closes its connection (its body is left unread), so a turn
	// storm has nothing to warm.
	warm bool
}

// runStorm measures B's context at rest, then sends storm requests of A
// at once (send makes the i-th) while B keeps reading its context.
func (s *system) runStorm(shape stormShape, sessionB string, send func(ctx context.Context, c *http.Client, i int) (int, error)) stormResult {
	s.t.Helper()
	var res stormResult
	cA := client(2 * answerWithin) // long enough to see an answer that came too late
	if shape.warm {
		var warm sync.WaitGroup
		for range storm {
			warm.Go(func() {
				code, _, err := do(context.Background(), cA, http.MethodGet, s.proc.URL()+"/readyz", "", nil, 0)
				require.NoError(s.t, err)
				require.Equal(s.t, http.StatusOK, code)
			})
		}
		warm.Wait()
	}
	cB := client(30 * time.Second)
	for range restSamples / shape.rounds {
		d, err := s.readContext(cB, keyB, sessionB)
		require.NoError(s.t, err)
		res.rest = append(res.rest, d)
	}

	stop := make(chan struct{})
	w, watchers := s.watch(stop)
	done := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			d, err := s.readContext(cB, keyB, sessionB)
			if err != nil {
				res.neighbour = err
				return
			}
			res.during = append(res.during, d)
		}
	})

	res.outcomes = make([]outcome, storm)
	start := make(chan struct{})
	var all sync.WaitGroup
	for i := range storm {
		all.Go(func() {
			<-start
			t0 := time.Now()
			code, err := send(context.Background(), cA, i)
			res.outcomes[i] = outcome{status: code, took: time.Since(t0), err: err}
		})
	}
	close(start)
	all.Wait()
	close(done)
	reader.Wait()
	// One more poll of /readyz after the storm: the process survived it.
	time.Sleep(2 * readyEvery)
	close(stop)
	watchers.Wait()
	if rss, err := s.proc.PeakRSS(); err == nil {
		w.peak.Store(rss)
	}
	res.peakRSS, res.notReady, res.polls, res.killed = w.peak.Load(), w.notReady.Load(), w.polls.Load(), w.killed.Load()
	if v, ok := w.lastErr.Load().(string); ok {
		res.lastReady = v
	}
	return res
}

// check asserts the bounds on a storm's result; ok are the statuses a
// storm request may answer.
func (res stormResult) check(t *testing.T, name string, ok ...int) {
	t.Helper()
	counts := map[int]int{}
	var slowest time.Duration
	var failed []string
	for i, o := range res.outcomes {
		counts[o.status]++
		slowest = max(slowest, o.took)
		switch {
		case o.err != nil:
			failed = append(failed, fmt.Sprintf("#%d: no answer after %s: %v", i, o.took, o.err))
		case !slices.Contains(ok, o.status):
			failed = append(failed, fmt.Sprintf("#%d: status %d", i, o.status))
		case o.took > answerWithin:
			failed = append(failed, fmt.Sprintf("#%d: answered %d after %s", i, o.status, o.took))
		}
	}
	rest, during := res.rest.p99(), res.during.p99()
	t.Logf("%s: answers by status %v (0: none), slowest %s; peak RSS %d MiB; /readyz not 200 in %d of %d polls; "+
		"B's context p99 at rest %s (%d samples), during the storm %s (%d samples)",
		name, counts, slowest.Round(time.Millisecond), res.peakRSS>>20, res.notReady, res.polls,
		rest.Round(time.Microsecond), len(res.rest), during.Round(time.Microsecond), len(res.during))
	slow := slices.Clone(res.during)
	slices.Sort(slow)
	t.Logf("%s: B's slowest context requests during the storm: %v", name, slow[max(len(slow)-5, 0):])
	require.False(t, res.killed, "%s: the process passed %d MiB of RSS and was killed", name, killAbove>>20)
	require.Empty(t, failed, "%s: every request answered %v within %s", name, ok, answerWithin)
	require.Zero(t, res.notReady, "%s: /readyz answered 200 throughout (last failure: %s)", name, res.lastReady)
	require.LessOrEqual(t, res.peakRSS, int64(maxPeakRSS), "%s: peak RSS within %d MiB", name, maxPeakRSS>>20)
	require.NoError(t, res.neighbour, "%s: B's context kept answering", name)
	require.NotEmpty(t, res.during, "%s: B read its context during the storm", name)
}

// storms runs the storms of shape, checking each (check), and asserts B's
// slowdown over all of them; after, when set, runs after each storm.
func (s *system) storms(name string, shape stormShape, sessionB string, send func(ctx context.Context, c *http.Client, round, i int) (int, error),
	after func(round int, res stormResult), ok ...int,
) {
	s.t.Helper()
	var rest, during samples
	for round := range shape.rounds {
		res := s.runStorm(shape, sessionB, func(ctx context.Context, c *http.Client, i int) (int, error) { return send(ctx, c, round, i) })
		res.check(s.t, fmt.Sprintf("%s (storm %d of %d)", name, round+1, shape.rounds), ok...)
		rest, during = append(rest, res.rest...), append(during, res.during...)
		if after != nil {
			after(round, res)
		}
	}
	slowdown := float64(during.p99()) / float64(rest.p99())
	s.t.Logf("%s: B's context p99 at rest %s (%d samples), during the storms %s (%d samples): slowdown %.2f (goal %.0f met: %t)",
		name, rest.p99().Round(time.Microsecond), len(rest), during.p99().Round(time.Microsecond), len(during), slowdown,
		goalSlowdown, slowdown <= goalSlowdown)
	require.LessOrEqual(s.t, slowdown, maxSlowdown,
		"%s: B's context p99 during the storms (%s) within %.0f× its p99 at rest (%s)", name, during.p99(), maxSlowdown, rest.p99())
}

// fillNeighbour gives tenant B its small session: ten turns of four
// messages of 200 bytes.
func (s *system) fillNeighbour() string {
	const small = "small"
	var evs []turn.Event
	for seq := int64(1); seq <= 10; seq++ {
		evs = append(evs, event(tenantB, small, seq, 4, 200))
	}
	s.fill(tenantB, keyB, small, evs)
	return small
}

// TestContextStormOnTheLargestSession: tenant A holds the largest session
// its limits allow and asks for its context 200 times at once; every
// request is answered within 10 s (served, or refused with 429/503), the
// process stays ready and within 1 GiB, and tenant B's context requests stay
// within 3× their p99 at rest (over three storms).
func TestContextStormOnTheLargestSession(t *testing.T) {
	s := newSystem(t)
	const big = "big"
	var fillA []turn.Event
	for seq := int64(1); seq <= sessionMessages/turnMessages; seq++ {
		fillA = append(fillA, event(tenantA, big, seq, turnMessages, 0))
	}
	s.fill(tenantA, keyA, big, fillA)
	small := s.fillNeighbour()

	url := s.proc.URL() + "/v1/sessions/" + big + "/context"
	// Three storms: one is short (a quarter to half a second once A's
	// session is cached), and its p99 alone would be its one or two
	// slowest samples, those that met A's 200 requests arriving together.
	shape := stormShape{rounds: 3, warm: true}
	s.storms("200 concurrent GET /context of A's 30,000-message session", shape, small,
		func(ctx context.Context, c *http.Client, _, _ int) (int, error) {
			return discard(ctx, c, http.MethodGet, url, keyA, nil, 0)
		}, nil, http.StatusOK, http.StatusTooManyRequests, http.StatusServiceUnavailable)
}

// TestTurnStormOfTheLargestTurns: tenant A sends 200 of the largest turns
// it may at once, with the same bounds.
func TestTurnStormOfTheLargestTurns(t *testing.T) {
	s := newSystem(t)
	small := s.fillNeighbour()

	// The largest turn A may send: 10,000 messages in just under 8 MiB
	// (the margin is the event's other fields and the bus's headers).
	text := (turnBytes - 64<<10) / turnMessages
	for len(mustMarshal(t, event(tenantA, "storm-000", 1, turnMessages, text))) > turnBytes-16<<10 {
		text--
	}
	// Each request its own session and event; the messages, the bulk of
	// each body, are shared so the test holds one copy.
	head, tail := splitEvent(t, event(tenantA, "storm-000", 1, turnMessages, text))
	t.Logf("each turn: %d messages, %d bytes", turnMessages, len(head)+len(tail))
	url := s.proc.URL() + "/v1/turns"
	session := func(round, i int) string { return fmt.Sprintf("storm-%d-%03d", round, i) }
	// One storm of turns lasts seconds: its own p99 is over 1,500 samples.
	shape := stormShape{rounds: 1}
	s.storms("200 concurrent POST /v1/turns of A's largest turn", shape, small,
		func(ctx context.Context, c *http.Client, round, i int) (int, error) {
			h := bytes.ReplaceAll(head, []byte("storm-000"), []byte(session(round, i)))
			body := io.MultiReader(bytes.NewReader(h), bytes.NewReader(tail))
			return discard(ctx, c, http.MethodPost, url, keyA, body, int64(len(h)+len(tail)))
		},
		// The next storm's rest is measured after the turns this one
		// delivered are stored, not while the accountant applies them.
		func(round int, res stormResult) {
			for i, o := range res.outcomes {
				if o.status != http.StatusAccepted {
					continue
				}
				require.Eventually(t, func() bool {
					sess, err := s.store.GetSession(context.Background(), tenantA, session(round, i))
					return err == nil && sess.AppliedSeq == 1
				}, settle, 100*time.Millisecond, "A's accepted turn %s was not applied", session(round, i))
			}
		}, http.StatusAccepted, http.StatusTooManyRequests, http.StatusServiceUnavailable)
}

func mustMarshal(t *testing.T, ev turn.Event) []byte {
	t.Helper()
	data, err := turn.Marshal(ev)
	require.NoError(t, err)
	return data
}

// splitEvent encodes ev and splits it before its messages: the head names
// the event and its session, the tail holds the messages.
func splitEvent(t *testing.T, ev turn.Event) (head, tail []byte) {
	t.Helper()
	data := mustMarshal(t, ev)
	i := bytes.Index(data, []byte(`"input_messages"`))
	require.Positive(t, i)
	return data[:i], data[i:]
}
