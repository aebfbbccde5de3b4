package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
)

func TestRunnersCountRedeliveriesDeadLettersAndPending(t *testing.T) {
	t.Parallel()
	metrics := telemetrytest.New(t)
	cfg := bustest.Config(t)
	cfg.Meter = metrics.Meter()
	cfg.ConsumerInfoInterval = 20 * time.Millisecond
	b := bustest.Connect(t, cfg)

	// Five messages wait before the consumer exists.
	for _, id := range []string{"ok-1", "ok-2", "retry-once", "bad", "always-fails"} {
		publishTurn(t, b, "s-1", id)
	}
	release := make(chan struct{})
	var o outcomes
	spec := turnSpec("metered", &o)
	spec.MaxDeliver = 2
	spec.Workers = 1
	bustest.Run(t, b, spec, func(ctx context.Context, m bus.Message) error {
		<-release
		switch {
		case m.MsgID == "retry-once" && m.NumDelivered == 1:
			return errors.New("try again")
		case m.MsgID == "bad":
			return bus.Permanent(errors.New("bad input"))
		case m.MsgID == "always-fails":
			return errors.New("still failing")
		}
		return nil
	})

	// The gauge reads the consumer: everything is pending while the handler waits.
	require.Eventually(t, func() bool {
		n, ok := metrics.Gauge("mnemos.bus.consumer.pending", "consumer", "metered")
		return ok && n == 5
	}, waitFor, tick, "five messages pending")

	close(release)
	require.Eventually(t, func() bool { return o.count(bus.DeadLettered) == 2 && o.count(bus.Acked) == 3 }, waitFor, tick)
	require.EqualValues(t, 2, metrics.Sum("mnemos.bus.redeliveries", "consumer", "metered"), "retry-once and always-fails came back once each")
	require.EqualValues(t, 1, metrics.Sum("mnemos.bus.dead_letters", "reason", bus.ReasonPermanent))
	require.EqualValues(t, 1, metrics.Sum("mnemos.bus.dead_letters", "reason", bus.ReasonMaxDeliveries))
	require.Eventually(t, func() bool {
		n, ok := metrics.Gauge("mnemos.bus.consumer.pending", "consumer", "metered")
		return ok && n == 0
	}, waitFor, tick, "nothing pending once every message is settled")
}
