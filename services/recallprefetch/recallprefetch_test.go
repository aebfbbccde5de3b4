package recallprefetch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/services/recallprefetch"
)

const tenant = "acme"

// TestBadEventsAreDeadLettered: an event that cannot be read is refused with
// its reason, counted, and asks no selector.
func TestBadEventsAreDeadLettered(t *testing.T) {
	t.Parallel()
	st := pgtest.New(t)
	metrics := telemetrytest.New(t)
	bcfg := bustest.Config(t)
	bcfg.Meter = metrics.Meter()
	b := bustest.Connect(t, bcfg)
	require.NoError(t, st.EnsureTenant(context.Background(), tenant, "Acme"))
	mem, err := memory.NewStore(st, nil, memory.Options{})
	require.NoError(t, err)
	var calls atomic.Int64
	selector := builtin.New(map[llm.Task]builtin.Handler{llm.TaskRecall: func(ctx context.Context, req llm.Request) (llm.Response, error) {
		calls.Add(1)
		return recall.Builtin(ctx, req)
	}})
	r, err := recall.New(st, mem, selector, func(context.Context, string) (recall.Settings, error) { return recall.DefaultSettings(), nil }, metrics.Meter(), recall.Options{})
	require.NoError(t, err)
	svc, err := recallprefetch.New(recallprefetch.DefaultConfig(), b, r, bustest.Logger(t))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	sub, err := b.Conn().SubscribeSync(b.Prefix("deadletter." + bus.KindTurnAccounted + ".>"))
	require.NoError(t, err)
	scope := map[string]string{"project": "repo-x"}
	other, err := json.Marshal(events.TurnAccounted{Schema: events.SchemaTurnAccounted, TenantID: "someone-else", SessionID: "bad", Seq: 1, MemoryScope: scope})
	require.NoError(t, err)
	noSeq, err := json.Marshal(events.TurnAccounted{Schema: events.SchemaTurnAccounted, TenantID: tenant, SessionID: "bad", MemoryScope: scope, MessageUUIDs: []string{"u1"}})
	require.NoError(t, err)
	oldSchema, err := json.Marshal(events.TurnAccounted{Schema: "mnemos.turn_accounted.v0", TenantID: tenant, SessionID: "bad", Seq: 3})
	require.NoError(t, err)
	for i, data := range [][]byte{[]byte("{not json"), other, noSeq, oldSchema} {
		_, err := b.Publish(context.Background(), b.Subject(bus.KindTurnAccounted, tenant, "bad"), fmt.Sprintf("bad-%d", i), data, nil)
		require.NoError(t, err)
	}
	var reasons []string
	for range 4 {
		msg, err := sub.NextMsg(30 * time.Second)
		require.NoError(t, err)
		require.Equal(t, recallprefetch.Durable, msg.Header.Get(bus.HeaderDeadLetterConsumer))
		reasons = append(reasons, msg.Header.Get(bus.HeaderDeadLetterReason))
	}
	all := strings.Join(reasons, "\n") // workers settle them in any order
	require.Contains(t, all, "turn.accounted: invalid character")
	require.Contains(t, all, "arrived on the subject of acme/bad")
	require.Contains(t, all, "want a positive seq and no negative number")
	require.Contains(t, all, `unknown schema "mnemos.turn_accounted.v0"`)
	require.Eventually(t, func() bool {
		return metrics.Sum("mnemos.bus.deliveries", "result", string(bus.DeadLettered)) == 4
	}, 10*time.Second, 10*time.Millisecond)
	require.Zero(t, calls.Load())
}
