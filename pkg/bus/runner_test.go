package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/natsembed"
)

const waitFor, tick = 10 * time.Second, 10 * time.Millisecond

// outcomes records what a runner reports.
type outcomes struct {
	mu   sync.Mutex
	list []bus.Outcome
}

func (o *outcomes) add(out bus.Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.list = append(o.list, out)
}

func (o *outcomes) count(r bus.Result) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, out := range o.list {
		if out.Result == r {
			n++
		}
	}
	return n
}

func (o *outcomes) settleErrs() []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var errs []error
	for _, out := range o.list {
		if out.SettleErr != nil {
			errs = append(errs, out.SettleErr)
		}
	}
	return errs
}

// turnSpec is a consumer of turn.completed with test-sized timings.
func turnSpec(durable string, o *outcomes) bus.ConsumerSpec {
	return bus.ConsumerSpec{
		Stream:        bus.StreamTurns,
		Durable:       durable,
		FilterSubject: bus.KindTurnCompleted + ".>",
		AckWait:       time.Second,
		Backoff:       func(int) time.Duration { return 20 * time.Millisecond },
		OnOutcome:     o.add,
	}
}

func consumerInfo(t *testing.T, b *bus.Bus, durable string) *jetstream.ConsumerInfo {
	t.Helper()
	ctx := testContext(t)
	c, err := b.JetStream().Consumer(ctx, b.StreamName(bus.StreamTurns), durable)
	require.NoError(t, err)
	info, err := c.Info(ctx)
	require.NoError(t, err)
	return info
}

// awaitCount waits until n outcomes of result r are recorded. The runner
// records a message's outcome after it sent the ack, and the server may
// move its ack floor first: a test that saw the floor move can be a moment
// early for the outcome (TestRunAcksOnce failed so, once, in CI).
func (o *outcomes) awaitCount(t *testing.T, r bus.Result, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return o.count(r) >= n }, waitFor, tick, "%d outcomes %v", n, r)
	require.Equal(t, n, o.count(r), "outcomes %v", r)
}

// requireAllAcked waits until the server has every message of the consumer
// acknowledged, up to stream sequence seq.
func requireAllAcked(t *testing.T, b *bus.Bus, durable string, seq uint64) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		info := consumerInfo(t, b, durable)
		assert.Zero(c, info.NumAckPending)
		assert.Zero(c, info.NumPending)
		assert.Equal(c, seq, info.AckFloor.Stream)
	}, waitFor, tick)
}

func publishTurn(t *testing.T, b *bus.Bus, session, id string) *jetstream.PubAck {
	t.Helper()
	ack, err := b.Publish(testContext(t), b.Subject(bus.KindTurnCompleted, "acme", session), id, []byte(`{"event_id":"`+id+`"}`), nil)
	require.NoError(t, err)
	return ack
}

func TestRunAcksOnce(t *testing.T) {
	t.Parallel()
	b := bustest.New(t)
	var o outcomes
	var calls, redelivered atomic.Int32
	bustest.Run(t, b, turnSpec("acks", &o), func(ctx context.Context, m bus.Message) error {
		calls.Add(1)
		if m.NumDelivered != 1 {
			redelivered.Add(1)
		}
		return nil
	})

	var last *jetstream.PubAck
	for i := range 3 {
		last = publishTurn(t, b, "s-1", "e-"+strconv.Itoa(i))
	}
	requireAllAcked(t, b, "acks", last.Sequence)
	o.awaitCount(t, bus.Acked, 3)
	require.EqualValues(t, 3, calls.Load())
	require.Zero(t, redelivered.Load())
	require.Empty(t, o.settleErrs())
	require.Zero(t, consumerInfo(t, b, "acks").NumRedelivered)
}

func TestRunRetriesWithDelayThenSucceeds(t *testing.T) {
	t.Parallel()
	b := bustest.New(t)
	var o outcomes
	spec := turnSpec("retry", &o)
	spec.Backoff = func(attempt int) time.Duration { return time.Duration(attempt) * 100 * time.Millisecond }

	var mu sync.Mutex
	var deliveries []int
	var at []time.Time
	bustest.Run(t, b, spec, func(ctx context.Context, m bus.Message) error {
		mu.Lock()
		defer mu.Unlock()
		deliveries = append(deliveries, m.NumDelivered)
		at = append(at, time.Now())
		if m.NumDelivered < 3 {
			return errors.New("database unavailable")
		}
		return nil
	})
	ack := publishTurn(t, b, "s-1", "e-1")

	requireAllAcked(t, b, "retry", ack.Sequence)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{1, 2, 3}, deliveries)
	require.GreaterOrEqual(t, at[1].Sub(at[0]), 90*time.Millisecond, "backoff(1)")
	require.GreaterOrEqual(t, at[2].Sub(at[1]), 190*time.Millisecond, "backoff(2)")
	require.Equal(t, 2, o.count(bus.Retried))
	o.awaitCount(t, bus.Acked, 1)
	require.Zero(t, streamMsgs(t, b, bus.StreamDeadLetter))
}

// deadLetter returns the latest dead letter of a turn.completed subject.
func deadLetter(t *testing.T, b *bus.Bus, session string) *jetstream.RawStreamMsg {
	t.Helper()
	ctx := testContext(t)
	s, err := b.JetStream().Stream(ctx, b.StreamName(bus.StreamDeadLetter))
	require.NoError(t, err)
	msg, err := s.GetLastMsgForSubject(ctx, b.Subject("deadletter."+bus.KindTurnCompleted, "acme", session))
	require.NoError(t, err)
	return msg
}

func TestRunPermanentErrorDeadLetters(t *testing.T) {
	t.Parallel()
	b := bustest.New(t)
	var o outcomes
	spec := turnSpec("permanent", &o)
	spec.AckWait = 300 * time.Millisecond // a missing verdict would show quickly

	var calls atomic.Int32
	bustest.Run(t, b, spec, func(ctx context.Context, m bus.Message) error {
		calls.Add(1)
		return fmt.Errorf("decode turn: %w", bus.Permanent(errors.New("unknown schema \"mnemos.turn.v9\"\nline 2")))
	})
	ack := publishTurn(t, b, "s-1", "e-1")

	require.Eventually(t, func() bool { return o.count(bus.DeadLettered) == 1 }, waitFor, tick)
	requireAllAcked(t, b, "permanent", ack.Sequence)
	time.Sleep(3 * spec.AckWait) // a redelivery would happen by now

	require.EqualValues(t, 1, calls.Load())
	require.EqualValues(t, 1, streamMsgs(t, b, bus.StreamDeadLetter))
	require.Empty(t, o.settleErrs())

	dl := deadLetter(t, b, "s-1")
	require.JSONEq(t, `{"event_id":"e-1"}`, string(dl.Data))
	require.Equal(t, `decode turn: unknown schema "mnemos.turn.v9" line 2`, dl.Header.Get(bus.HeaderDeadLetterReason))
	require.Equal(t, "permanent", dl.Header.Get(bus.HeaderDeadLetterConsumer))
	require.Equal(t, "1", dl.Header.Get(bus.HeaderDeadLetterDeliveries))
	require.Equal(t, b.Subject(bus.KindTurnCompleted, "acme", "s-1"), dl.Header.Get(bus.HeaderOriginalSubject))
	require.Equal(t, "e-1", dl.Header.Get(bus.HeaderOriginalMsgID))
	require.Equal(t, b.StreamName(bus.StreamTurns), dl.Header.Get(bus.HeaderOriginalStream))
	require.Equal(t, strconv.FormatUint(ack.Sequence, 10), dl.Header.Get(bus.HeaderOriginalSequence))
	require.NotEqual(t, "e-1", dl.Header.Get(jetstream.MsgIDHeader))
}

func TestRunDeadLettersAfterMaxDeliver(t *testing.T) {
	t.Parallel()
	b := bustest.New(t)
	var o outcomes
	spec := turnSpec("forever", &o)
	spec.MaxDeliver = 3
	spec.AckWait = 300 * time.Millisecond

	var calls atomic.Int32
	bustest.Run(t, b, spec, func(ctx context.Context, m bus.Message) error {
		calls.Add(1)
		return errors.New("still failing")
	})
	ack := publishTurn(t, b, "s-1", "e-1")

	require.Eventually(t, func() bool { return o.count(bus.DeadLettered) == 1 }, waitFor, tick)
	requireAllAcked(t, b, "forever", ack.Sequence)
	time.Sleep(3 * spec.AckWait)

	require.EqualValues(t, 3, calls.Load())
	require.Equal(t, 2, o.count(bus.Retried))
	require.EqualValues(t, 1, streamMsgs(t, b, bus.StreamDeadLetter))
	dl := deadLetter(t, b, "s-1")
	require.Equal(t, "3", dl.Header.Get(bus.HeaderDeadLetterDeliveries))
	require.Equal(t, "still failing", dl.Header.Get(bus.HeaderDeadLetterReason))
}

func TestRunRecoversPanic(t *testing.T) {
	t.Parallel()
	b := bustest.New(t)
	var o outcomes
	var calls atomic.Int32
	bustest.Run(t, b, turnSpec("panic", &o), func(ctx context.Context, m bus.Message) error {
		if calls.Add(1) == 1 {
			panic("nil map")
		}
		return nil
	})
	ack := publishTurn(t, b, "s-1", "e-1")

	requireAllAcked(t, b, "panic", ack.Sequence)
	require.EqualValues(t, 2, calls.Load())
	require.Equal(t, 1, o.count(bus.Retried))
	o.awaitCount(t, bus.Acked, 1)
	require.Zero(t, streamMsgs(t, b, bus.StreamDeadLetter))
}

func TestRunStopDrainsInFlight(t *testing.T) {
	t.Parallel()
	b := bustest.New(t)
	var o outcomes
	started := make(chan struct{})
	var finished atomic.Bool
	r := bustest.Run(t, b, turnSpec("drain", &o), func(ctx context.Context, m bus.Message) error {
		close(started)
		time.Sleep(300 * time.Millisecond)
		finished.Store(true)
		return nil
	})
	ack := publishTurn(t, b, "s-1", "e-1")
	<-started

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, r.Stop(ctx))
	require.True(t, finished.Load())
	require.Equal(t, 1, o.count(bus.Acked))
	select {
	case <-r.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	requireAllAcked(t, b, "drain", ack.Sequence)
}

func TestRunHardStopHandsMessageBack(t *testing.T) {
	t.Parallel()
	b := bustest.New(t)
	var o outcomes
	spec := turnSpec("hardstop", &o)
	spec.AckWait = time.Minute // the message must come back by Nak, not by AckWait

	started := make(chan struct{})
	r := bustest.Run(t, b, spec, func(ctx context.Context, m bus.Message) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	ack := publishTurn(t, b, "s-1", "e-1")
	<-started

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, r.Stop(ctx), context.DeadlineExceeded)
	<-r.Done()

	// The delivery count of a message handed back this way depends on the
	// server version; what matters is that it comes back long before AckWait.
	delivered := make(chan struct{}, 1)
	bustest.Run(t, b, spec, func(ctx context.Context, m bus.Message) error {
		delivered <- struct{}{}
		return nil
	})
	select {
	case <-delivered:
	case <-time.After(waitFor):
		t.Fatal("message not redelivered after a hard stop")
	}
	requireAllAcked(t, b, "hardstop", ack.Sequence)
	require.Zero(t, streamMsgs(t, b, bus.StreamDeadLetter))
}

// TestRunManyConcurrentMessagesEachHandledOnce publishes from several
// goroutines to many subjects at once: every message is handled exactly once
// and acknowledged. (Speed is measured by the benchmarks, not here.)
func TestRunManyConcurrentMessagesEachHandledOnce(t *testing.T) {
	t.Parallel()
	b := bustest.New(t)
	const n = 2000

	var o outcomes
	spec := turnSpec("throughput", &o)
	spec.OnOutcome = nil
	var seen sync.Map
	var handled atomic.Int32
	bustest.Run(t, b, spec, func(ctx context.Context, m bus.Message) error {
		if _, dup := seen.LoadOrStore(m.MsgID, true); dup {
			return errors.New("duplicate delivery of " + m.MsgID)
		}
		handled.Add(1)
		return nil
	})

	var wg sync.WaitGroup
	for p := range 8 {
		wg.Go(func() {
			for i := p; i < n; i += 8 {
				publishTurn(t, b, "s-"+strconv.Itoa(i%50), "e-"+strconv.Itoa(i))
			}
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool { return handled.Load() == n }, 60*time.Second, tick)
	requireAllAcked(t, b, "throughput", n)
}

func TestRunTransientErrorRetriesInPlaceWithoutSpendingDeliveries(t *testing.T) {
	t.Parallel()
	b := bustest.New(t)
	var o outcomes
	spec := turnSpec("transient", &o)
	spec.MaxDeliver = 1 // one delivery only: a retry by redelivery would dead-letter

	var mu sync.Mutex
	var deliveries []int
	bustest.Run(t, b, spec, func(ctx context.Context, m bus.Message) error {
		mu.Lock()
		defer mu.Unlock()
		deliveries = append(deliveries, m.NumDelivered)
		if len(deliveries) < 4 {
			return bus.Transient(errors.New("connection refused"))
		}
		return nil
	})
	ack := publishTurn(t, b, "s-1", "e-1")

	requireAllAcked(t, b, "transient", ack.Sequence)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{1, 1, 1, 1}, deliveries, "retried in place, never redelivered")
	o.awaitCount(t, bus.Acked, 1)
	require.Zero(t, o.count(bus.Retried))
	require.Zero(t, streamMsgs(t, b, bus.StreamDeadLetter))
}

func TestAfterHandledRunsBeforeTheAck(t *testing.T) {
	t.Parallel()
	cfg := bustest.Config(t)
	var calls atomic.Int32
	var b *bus.Bus
	cfg.AfterHandled = func(consumer string) {
		assert.Equal(t, "after-handled", consumer)
		calls.Add(1)
		// The message is handled but not acknowledged yet.
		info := consumerInfo(t, b, consumer)
		assert.Equal(t, 1, info.NumAckPending)
	}
	b = bustest.Connect(t, cfg)
	o := &outcomes{}
	bustest.Run(t, b, turnSpec("after-handled", o), func(context.Context, bus.Message) error { return nil })
	_, err := b.Publish(testContext(t), b.Subject(bus.KindTurnCompleted, "acme", "s-1"), "e-1", []byte(`{}`), nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return o.count(bus.Acked) == 1 }, waitFor, tick)
	require.EqualValues(t, 1, calls.Load())
	require.Zero(t, consumerInfo(t, b, "after-handled").NumAckPending)
}

// TestInProcessServer runs the bus on an embedded server that opens no
// port, as mnemos -target=all does: publish, consume and acknowledge go
// through the in-process connection. With a port and generated credentials,
// the in-process connection presents them from URL.
func TestInProcessServer(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]natsembed.Options{"no port": {}, "port with credentials": {Listen: true}} {
		s, err := natsembed.Start(opts)
		require.NoError(t, err)
		t.Cleanup(s.Shutdown)
		b := bustest.Connect(t, bus.Config{URL: s.ClientURL(), InProcess: s, Name: "in-process", Logger: bustest.Logger(t)})

		var o outcomes
		bustest.Run(t, b, turnSpec("in-process", &o), func(context.Context, bus.Message) error { return nil })
		last := publishTurn(t, b, "s-1", "e-1")
		requireAllAcked(t, b, "in-process", last.Sequence)
		// The runner reports the outcome after the server has the ack.
		require.Eventually(t, func() bool { return o.count(bus.Acked) == 1 }, waitFor, tick, name)
	}
	_, err := bus.Connect(testContext(t), bus.Config{})
	require.ErrorContains(t, err, "URL is required")
}

// TestRunHoldsAtMostMaxBytes: with MaxBytes, the handlers hold messages
// only as far as their bytes fit in it, however many workers wait; every
// message is still handled, and without MaxBytes the same messages all run
// at once.
func TestRunHoldsAtMostMaxBytes(t *testing.T) {
	t.Parallel()
	b := bustest.New(t)
	// A budget of 1 is raised to the largest message the server takes,
	// and a little more: four messages of a quarter of that fit, five do
	// not.
	size := int(b.MaxPayload()) / 4
	const n, workers, fit = 12, 12, 4

	for _, budget := range []int{1, 0} {
		durable := fmt.Sprintf("held%d", budget)
		var o outcomes
		spec := turnSpec(durable, &o)
		spec.FilterSubject = bus.KindTurnCompleted + "." + durable + ".>"
		spec.Workers, spec.MaxBytes = workers, budget
		spec.AckWait = time.Minute
		var held, most atomic.Int32
		release := make(chan struct{})
		bustest.Run(t, b, spec, func(ctx context.Context, m bus.Message) error {
			now := held.Add(1)
			for {
				was := most.Load()
				if now <= was || most.CompareAndSwap(was, now) {
					break
				}
			}
			<-release
			held.Add(-1)
			return nil
		})
		data := make([]byte, size)
		for i := range n {
			_, err := b.Publish(testContext(t), b.Subject(bus.KindTurnCompleted, durable, "s"), durable+"-"+strconv.Itoa(i), data, nil)
			require.NoError(t, err)
		}
		want := int32(n)
		if budget > 0 {
			want = fit
		}
		require.Eventually(t, func() bool { return held.Load() == want }, waitFor, tick, "%d messages held at once", want)
		time.Sleep(200 * time.Millisecond) // no more come
		require.Equal(t, want, most.Load())
		close(release)
		o.awaitCount(t, bus.Acked, n)
	}
}
