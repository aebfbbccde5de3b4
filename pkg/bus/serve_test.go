package bus_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
)

var errOutage = errors.New("database unreachable")

func TestClassifyMarksOutagesTransient(t *testing.T) {
	t.Parallel()
	b := bustest.New(t)
	var o outcomes
	spec := turnSpec("classify", &o)
	spec.MaxDeliver = 1 // a retry by redelivery would dead-letter
	spec.Classify = bus.TransientIf(func(err error) bool { return errors.Is(err, errOutage) })

	var calls atomic.Int32
	bustest.Run(t, b, spec, func(ctx context.Context, m bus.Message) error {
		if calls.Add(1) < 3 {
			return errOutage // unmarked: only the hook makes it transient
		}
		return nil
	})
	ack := publishTurn(t, b, "s-1", "e-1")
	requireAllAcked(t, b, "classify", ack.Sequence)
	require.Equal(t, int32(3), calls.Load(), "retried in place until it succeeded")
	require.Zero(t, streamMsgs(t, b, bus.StreamDeadLetter))
}

func TestTransientIfLeavesMarkedErrorsAlone(t *testing.T) {
	t.Parallel()
	classify := bus.TransientIf(func(error) bool { return true })
	require.NoError(t, classify(nil))
	require.True(t, bus.IsPermanent(classify(bus.Permanent(errOutage))), "a permanent error stays permanent")
	require.False(t, bus.IsTransient(classify(bus.Permanent(errOutage))))
	require.True(t, bus.IsTransient(classify(errOutage)))
}

func TestServeRunsConsumersAndLoopsAndStopsThemWithinTheDrain(t *testing.T) {
	t.Parallel()
	b := bustest.New(t)
	var o outcomes
	handled := make(chan string, 10)
	release := make(chan struct{})
	var stopping atomic.Bool
	var loopEnded, waited atomic.Bool

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() {
		served <- b.Serve(ctx, bus.Service{
			Name: "test",
			Consumers: []bus.Consumer{{Spec: turnSpec("serve", &o), Handler: func(ctx context.Context, m bus.Message) error {
				handled <- m.MsgID
				<-release // in flight when the service is told to stop
				return nil
			}}},
			Loops: []func(context.Context){func(ctx context.Context) {
				<-ctx.Done()
				loopEnded.Store(true)
			}},
			Stopping: func() { stopping.Store(true) },
			Wait:     func(context.Context) { waited.Store(true) },
			Drain:    10 * time.Second,
		})
	}()
	ack := publishTurn(t, b, "s-1", "e-1")
	require.Equal(t, "e-1", <-handled)
	cancel()
	require.Eventually(t, stopping.Load, waitFor, tick, "Stopping is called when the context ends")
	select {
	case err := <-served:
		t.Fatalf("Serve returned with a message in flight: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-served)
	require.True(t, loopEnded.Load())
	require.True(t, waited.Load())
	requireAllAcked(t, b, "serve", ack.Sequence)
}

func TestServeGivesUpAfterTheDrain(t *testing.T) {
	t.Parallel()
	b := bustest.New(t)
	var o outcomes
	var once sync.Once
	started := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- b.Serve(ctx, bus.Service{
			Name: "stuck",
			Consumers: []bus.Consumer{{Spec: turnSpec("stuck", &o), Handler: func(hctx context.Context, m bus.Message) error {
				once.Do(func() { close(started) })
				<-hctx.Done() // ends only when the runner cancels it
				return hctx.Err()
			}}},
			Drain: 300 * time.Millisecond,
		})
	}()
	publishTurn(t, b, "s-1", "e-1")
	<-started
	cancel()
	select {
	case err := <-served:
		require.ErrorContains(t, err, "stuck: stop")
	case <-time.After(waitFor):
		t.Fatal("Serve did not return after its drain")
	}
}
