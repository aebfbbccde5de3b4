package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// streamMsgs returns how many messages a stream (unprefixed name) holds.
func streamMsgs(t *testing.T, b *bus.Bus, name string) uint64 {
	t.Helper()
	ctx := testContext(t)
	s, err := b.JetStream().Stream(ctx, b.StreamName(name))
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	return info.State.Msgs
}

func TestEnsureStreamsIdempotent(t *testing.T) {
	t.Parallel()
	cfg := bustest.Config(t)
	b := bustest.Connect(t, cfg) // ensures the streams once
	ctx := testContext(t)
	prefix := ""
	if cfg.Namespace != "" {
		prefix = cfg.Namespace + "."
	}

	require.NoError(t, b.EnsureStreams(ctx))
	require.NoError(t, b.EnsureStreams(ctx))

	want := map[string]struct {
		subject string
		maxAge  time.Duration
	}{
		bus.StreamTurns:      {"turn.completed.>", 7 * 24 * time.Hour},
		bus.StreamEvents:     {"compact.>", 7 * 24 * time.Hour},
		bus.StreamDeadLetter: {"deadletter.>", 30 * 24 * time.Hour},
	}
	for name, w := range want {
		s, err := b.JetStream().Stream(ctx, b.StreamName(name))
		require.NoError(t, err, name)
		got := s.CachedInfo().Config
		require.Contains(t, got.Subjects, prefix+w.subject, name)
		require.Equal(t, w.maxAge, got.MaxAge, name)
		require.Equal(t, 2*time.Minute, got.Duplicates, name)
		require.Equal(t, jetstream.FileStorage, got.Storage, name)
		require.Equal(t, jetstream.LimitsPolicy, got.Retention, name)
	}
}

func TestPublishDeduplicatesByMsgID(t *testing.T) {
	t.Parallel()
	b := bustest.New(t)
	ctx := testContext(t)
	subject := b.Subject(bus.KindTurnCompleted, "acme", "s-1")

	first, err := b.Publish(ctx, subject, "event-1", []byte(`{"seq":1}`), nil)
	require.NoError(t, err)
	require.False(t, first.Duplicate)
	second, err := b.Publish(ctx, subject, "event-1", []byte(`{"seq":1}`), nil)
	require.NoError(t, err)
	require.True(t, second.Duplicate)
	require.Equal(t, first.Sequence, second.Sequence)
	require.EqualValues(t, 1, streamMsgs(t, b, bus.StreamTurns))

	_, err = b.Publish(ctx, subject, "", []byte(`{}`), nil)
	require.ErrorContains(t, err, "msgID is required")
}

func TestPublishLeavesHeadersAlone(t *testing.T) {
	t.Parallel()
	b := bustest.New(t)
	ctx := testContext(t)

	hdr := nats.Header{"Mnemos-Schema": []string{"mnemos.turn.v1"}}
	subject := b.Subject(bus.KindTurnCompleted, "acme", "s-1")
	_, err := b.Publish(ctx, subject, "event-1", []byte(`{}`), hdr)
	require.NoError(t, err)
	require.Equal(t, nats.Header{"Mnemos-Schema": []string{"mnemos.turn.v1"}}, hdr)

	s, err := b.JetStream().Stream(ctx, b.StreamName(bus.StreamTurns))
	require.NoError(t, err)
	got, err := s.GetLastMsgForSubject(ctx, subject)
	require.NoError(t, err)
	require.Equal(t, "mnemos.turn.v1", got.Header.Get("Mnemos-Schema"))
	require.Equal(t, "event-1", got.Header.Get(jetstream.MsgIDHeader))
}

func TestNamespace(t *testing.T) {
	t.Parallel()
	cfg := bustest.Config(t)
	if cfg.Namespace == "" {
		cfg.Namespace = "nsTest" // a server of this test's own: any name will do
	}
	b := bustest.Connect(t, cfg)
	ctx := testContext(t)
	ns := cfg.Namespace

	subject := b.Subject(bus.KindCompactRequested, "acme", "s-1")
	require.Equal(t, ns+".compact.requested.acme.s-1", subject)
	require.Equal(t, strings.ToUpper(ns)+"_EVENTS", b.StreamName(bus.StreamEvents))

	kind, tenant, session, err := b.ParseSubject(subject)
	require.NoError(t, err)
	require.Equal(t, []string{bus.KindCompactRequested, "acme", "s-1"}, []string{kind, tenant, session})
	_, _, _, err = b.ParseSubject("compact.requested.acme.s-1")
	require.Error(t, err, "outside the namespace")

	_, err = b.Publish(ctx, subject, "e-1", []byte(`{}`), nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, streamMsgs(t, b, bus.StreamEvents))

	_, err = b.Publish(ctx, "compact.requested.acme.s-1", "e-2", []byte(`{}`), nil)
	require.ErrorContains(t, err, "outside namespace")

	_, err = bus.Connect(ctx, bus.Config{URL: cfg.URL, Namespace: "a.b"})
	require.Error(t, err)
}

func TestSubject(t *testing.T) {
	t.Parallel()
	subject := bus.Subject(bus.KindSessionMemoryUpdated, "acme", "s-1")
	require.Equal(t, "session_memory.updated.acme.s-1", subject)

	kind, tenant, session, err := bus.ParseSubject(subject)
	require.NoError(t, err)
	require.Equal(t, bus.KindSessionMemoryUpdated, kind)
	require.Equal(t, "acme", tenant)
	require.Equal(t, "s-1", session)

	kind, _, _, err = bus.ParseSubject("deadletter.turn.completed.acme.s-1")
	require.NoError(t, err)
	require.Equal(t, "deadletter.turn.completed", kind)

	for _, bad := range []string{"", "acme", "acme.s-1", "turn.completed.acme.>", "turn..acme.s-1", "turn.completed.ac me.s-1", ".acme.s-1"} {
		_, _, _, err := bus.ParseSubject(bad)
		require.Error(t, err, "%q", bad)
	}

	require.True(t, bus.ValidToken("0b3e-uuid_X"))
	for _, bad := range []string{"", "a.b", "*", ">", "a b", "a\tb", "a\x00b"} {
		require.False(t, bus.ValidToken(bad), "%q", bad)
	}
}

func TestPermanent(t *testing.T) {
	t.Parallel()
	base := errors.New("bad schema")
	err := fmt.Errorf("decode: %w", bus.Permanent(base))

	require.True(t, bus.IsPermanent(err))
	require.ErrorIs(t, err, base)
	require.Equal(t, "decode: bad schema", err.Error())
	require.False(t, bus.IsPermanent(base))
	require.NoError(t, bus.Permanent(nil))
}

func TestDefaultBackoff(t *testing.T) {
	t.Parallel()
	for range 100 {
		require.InDelta(t, 187.5, float64(bus.DefaultBackoff(1).Milliseconds()), 62.5)
		require.InDelta(t, 375, float64(bus.DefaultBackoff(2).Milliseconds()), 125)
		d := bus.DefaultBackoff(1000)
		require.GreaterOrEqual(t, d, 15*time.Second)
		require.LessOrEqual(t, d, 30*time.Second)
	}
}

func TestDuplicateWindowIsConfigurable(t *testing.T) {
	t.Parallel()
	cfg := bustest.Config(t)
	cfg.DuplicateWindow = time.Second
	b := bustest.Connect(t, cfg)
	ctx := testContext(t)
	for _, name := range []string{bus.StreamTurns, bus.StreamEvents, bus.StreamDeadLetter} {
		s, err := b.JetStream().Stream(ctx, b.StreamName(name))
		require.NoError(t, err, name)
		require.Equal(t, time.Second, s.CachedInfo().Config.Duplicates, name)
	}
	subject := b.Subject(bus.KindTurnCompleted, "acme", "s-1")
	first, err := b.Publish(ctx, subject, "event-1", []byte(`{"seq":1}`), nil)
	require.NoError(t, err)
	require.False(t, first.Duplicate)
	// Past the window the server no longer knows the id: the same message
	// is stored again, and only the consumers' idempotency absorbs it.
	require.Eventually(t, func() bool {
		again, err := b.Publish(ctx, subject, "event-1", []byte(`{"seq":1}`), nil)
		require.NoError(t, err)
		return !again.Duplicate
	}, 10*time.Second, 200*time.Millisecond)
	require.EqualValues(t, 2, streamMsgs(t, b, bus.StreamTurns))
}
