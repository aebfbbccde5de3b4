package erasure_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/erasure"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// streamsHarness is a database with the tenants acme and globex, and a bus
// whose streams hold events of both.
type streamsHarness struct {
	st  *store.Store
	bus *bus.Bus
}

// seededStreams puts events of acme and globex in every stream: turns,
// events of the services, dead letters. globex has a session named acme,
// so a purge that matched the tenant's name anywhere in a subject would
// take it.
func seededStreams(t *testing.T) streamsHarness {
	t.Helper()
	ctx := context.Background()
	h := streamsHarness{st: pgtest.New(t), bus: bustest.New(t)}
	for _, tn := range []string{"acme", "globex"} {
		require.NoError(t, h.st.EnsureTenant(ctx, tn, tn))
		require.NoError(t, h.st.AddAPIKey(ctx, tn, "test", "key-"+tn))
		for _, session := range []string{"s1", "acme"} {
			for _, subject := range []string{
				bus.Subject(bus.KindTurnCompleted, tn, session),
				bus.Subject(bus.KindTurnAccounted, tn, session),
				bus.Subject(bus.KindCompactRequested, tn, session),
				bus.Subject(bus.KindDreamRequested, tn, session),
				bus.DeadLetterSubject(bus.Subject(bus.KindTurnCompleted, tn, session)),
			} {
				_, err := h.bus.Publish(ctx, h.bus.Prefix(subject), bus.MsgID(tn, subject), []byte(`{}`), nil)
				require.NoError(t, err, subject)
			}
		}
	}
	require.Equal(t, map[string]int{bus.StreamTurns: 2, bus.StreamEvents: 6, bus.StreamDeadLetter: 2}, h.events(t, "acme"))
	return h
}

// events counts the messages of tenant in each stream.
func (h streamsHarness) events(t *testing.T, tenant string) map[string]int {
	t.Helper()
	ctx := context.Background()
	out := map[string]int{}
	for _, name := range []string{bus.StreamTurns, bus.StreamEvents, bus.StreamDeadLetter} {
		stream, err := h.bus.JetStream().Stream(ctx, h.bus.StreamName(name))
		require.NoError(t, err)
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(h.bus.Prefix(">")))
		require.NoError(t, err)
		for subject, n := range info.State.Subjects {
			_, tn, _, err := h.bus.ParseSubject(subject)
			require.NoError(t, err)
			if tn == tenant {
				out[name] += int(n)
			}
		}
	}
	return out
}

// tenantExists reports whether the tenant's row is still there.
func (h streamsHarness) tenantExists(t *testing.T, tenant string) bool {
	t.Helper()
	_, err := h.st.TenantSettings(context.Background(), tenant)
	if err == nil {
		return true
	}
	require.ErrorIs(t, err, store.ErrUnknownTenant)
	return false
}

// TestTenantErasurePurgesItsEvents: erasing a tenant removes every message
// of it from every stream, and none of another tenant's.
func TestTenantErasurePurgesItsEvents(t *testing.T) {
	t.Parallel()
	h := seededStreams(t)
	globex := h.events(t, "globex")
	require.Equal(t, map[string]int{bus.StreamTurns: 2, bus.StreamEvents: 6, bus.StreamDeadLetter: 2}, globex)

	er, err := erasure.New(erasure.DefaultConfig(), h.st, h.bus, nil).EraseTenant(context.Background(), "acme", "test")
	require.NoError(t, err)
	require.True(t, er.Finished())
	require.Empty(t, h.events(t, "acme"), "no message of the erased tenant is left in any stream")
	require.Equal(t, globex, h.events(t, "globex"), "the other tenant's messages all stay")
	require.False(t, h.tenantExists(t, "acme"))
	require.True(t, h.tenantExists(t, "globex"))
}

// TestTenantErasureWithoutStreamsIsFinishedBySweep: an eraser without
// streams (the command line's) erases the rows and stops short, the
// tenant's row and events still there; the sweep of an eraser with
// streams purges them and finishes the erasure.
func TestTenantErasureWithoutStreamsIsFinishedBySweep(t *testing.T) {
	t.Parallel()
	h := seededStreams(t)
	ctx := context.Background()
	globex := h.events(t, "globex")

	er, err := erasure.New(erasure.DefaultConfig(), h.st, nil, nil).EraseTenant(ctx, "acme", "cli")
	require.ErrorIs(t, err, erasure.ErrStreamsPending)
	require.False(t, er.Finished())
	require.Equal(t, int64(1), er.Deleted["api_keys"], "the rows are erased")
	require.True(t, h.tenantExists(t, "acme"), "the tenant's row waits for the purge")
	require.Equal(t, 2, h.events(t, "acme")[bus.StreamTurns], "nothing purged without streams")

	cfg := erasure.DefaultConfig()
	cfg.Lease = time.Nanosecond
	done, err := erasure.New(cfg, h.st, nil, nil).Sweep(ctx)
	require.NoError(t, err, "a sweep without streams passes the erasure by")
	require.Zero(t, done)
	require.True(t, h.tenantExists(t, "acme"))

	done, err = erasure.New(cfg, h.st, h.bus, nil).Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, done)
	require.False(t, h.tenantExists(t, "acme"), "the sweep finished the erasure")
	require.Empty(t, h.events(t, "acme"))
	require.Equal(t, globex, h.events(t, "globex"))
}
