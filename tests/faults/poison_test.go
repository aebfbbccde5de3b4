package faults_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/events"
)

// TestPoisonMessageIsRetriedWithBackoffThenDeadLettered: a compaction request
// naming a compaction that does not exist fails every time. It is delivered
// a bounded number of times (8), with growing pauses between deliveries, then
// copied to the dead-letter subject with its reason and terminated; the
// consumer goes on with the other messages and never sees it again. A
// request that cannot even be read is dead-lettered at its first delivery.
func TestPoisonMessageIsRetriedWithBackoffThenDeadLettered(t *testing.T) {
	t.Parallel()
	s := newSystem(t, systemOptions{})
	comp := s.start("compactor", nil)
	ctx := context.Background()

	poison, err := json.Marshal(events.CompactRequested{
		Schema: events.SchemaCompactRequested, TenantID: tenant, SessionID: "p1",
		CompactionID: "no-such-compaction", Trigger: "manual", At: time.Now().UTC(),
	})
	require.NoError(t, err)
	subject := s.bus.Subject(bus.KindCompactRequested, tenant, "p1")
	ack, err := s.bus.Publish(ctx, subject, "poison-1", poison, nil)
	require.NoError(t, err)
	_, err = s.bus.Publish(ctx, subject, "unreadable-1", []byte(`{"schema": "mnemos.compact_requested.v1", "request": "one"`), nil)
	require.NoError(t, err)

	var letters map[string]jetstream.Msg
	require.Eventually(t, func() bool {
		letters = s.deadLetterMsgs()
		return len(letters) == 2
	}, settleTimeout, poll, "both messages end in the dead letters")

	dl := letters["poison-1"]
	require.Equal(t, "8", dl.Headers().Get(bus.HeaderDeadLetterDeliveries), "delivered 8 times, no more")
	require.Equal(t, "compactor", dl.Headers().Get(bus.HeaderDeadLetterConsumer))
	require.Contains(t, dl.Headers().Get(bus.HeaderDeadLetterReason), "no-such-compaction")
	require.Equal(t, poison, dl.Data(), "the dead letter carries the message as it was")
	require.Equal(t, strconv.FormatUint(ack.Sequence, 10), dl.Headers().Get(bus.HeaderOriginalSequence))
	// Backoff between deliveries: 250 ms doubling, each drawn from [d/2, d].
	// However slow the machine, the eighth delivery cannot come sooner than
	// the sum of the shortest pauses.
	first, err := messageTime(ctx, s, bus.StreamEvents, ack.Sequence)
	require.NoError(t, err)
	meta, err := dl.Metadata()
	require.NoError(t, err)
	minimum := time.Duration(0)
	for attempt := 1; attempt < 8; attempt++ {
		minimum += (250 * time.Millisecond << (attempt - 1)) / 2
	}
	require.GreaterOrEqual(t, meta.Timestamp.Sub(first), minimum, "retries were spread out, not immediate")

	bad := letters["unreadable-1"]
	require.Equal(t, "1", bad.Headers().Get(bus.HeaderDeadLetterDeliveries), "bad input is not retried")
	require.Contains(t, bad.Headers().Get(bus.HeaderDeadLetterReason), "compact.requested")

	// Never an endless loop: the consumer has nothing left to deliver, and
	// counted exactly what happened.
	s.waitConsumerSettled(bus.StreamEvents, "compactor")
	require.EqualValues(t, 7, comp.Metric(t, "mnemos_bus_deliveries_total", map[string]string{"consumer": "compactor", "result": "retried"}))
	require.EqualValues(t, 2, comp.Metric(t, "mnemos_bus_deliveries_total", map[string]string{"consumer": "compactor", "result": "dead_lettered"}))
	require.Zero(t, comp.Metric(t, "mnemos_bus_deliveries_total", map[string]string{"consumer": "compactor", "result": "acked"}))
}

// deadLetterMsgs returns the dead letters by original message id.
func (s *system) deadLetterMsgs() map[string]jetstream.Msg {
	s.t.Helper()
	out := map[string]jetstream.Msg{}
	for _, m := range s.readStream(bus.StreamDeadLetter, "") {
		out[m.Headers().Get(bus.HeaderOriginalMsgID)] = m
	}
	return out
}

// messageTime is when a stream stored its message seq.
func messageTime(ctx context.Context, s *system, stream string, seq uint64) (time.Time, error) {
	st, err := s.bus.JetStream().Stream(ctx, s.bus.StreamName(stream))
	if err != nil {
		return time.Time{}, err
	}
	m, err := st.GetMsg(ctx, seq)
	if err != nil {
		return time.Time{}, err
	}
	return m.Time, nil
}
