package store_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// statements records what a pool runs, in order, by sqlc name or keyword.
type statements struct {
	mu  sync.Mutex
	ran []string
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.add(d.SQL)
	return ctx
}
func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A batch's statements are recorded as pgx reports them, in order.
func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (s *statements) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	s.add(d.SQL)
}
func (s *statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (s *statements) add(sql string) {
	name := strings.ToUpper(strings.Fields(sql)[0])
	if after, ok := strings.CutPrefix(sql, "-- name: "); ok {
		name = strings.Fields(after)[0]
	}
	s.mu.Lock()
	s.ran = append(s.ran, name)
	s.mu.Unlock()
}

// index is where name first ran at or after from; -1 if it has not.
func (s *statements) index(name string, from int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if from < 0 || from > len(s.ran) {
		return -1
	}
	if i := slices.Index(s.ran[from:], name); i >= 0 {
		return from + i
	}
	return -1
}

// listening opens two stores of one database, as two processes would (the
// writer's statements traced by tracer, when set), with the tenant acme,
// and has each serve a relay's wake-ups: local the writer's, remote the
// other's. They stop listening when the test ends.
func listening(t *testing.T, tracer pgx.QueryTracer) (writer, other *store.Store, local, remote chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	url := pgtest.URL(t)
	writer, err := store.Open(ctx, store.Config{URL: url, MaxConns: 4, Tracer: tracer})
	require.NoError(t, err)
	t.Cleanup(writer.Close)
	other, err = store.Open(ctx, store.Config{URL: url, MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(other.Close)
	require.NoError(t, writer.EnsureTenant(ctx, "acme", "Acme"))
	local, remote = make(chan struct{}, 1), make(chan struct{}, 1)
	go func() { _ = writer.ListenOutbox(ctx, local) }()
	go func() { _ = other.ListenOutbox(ctx, remote) }()
	t.Cleanup(cancel) // first: the listeners give their connections back before the stores close
	return writer, other, local, remote
}

func TestAnOutboxCommitWakesRelaysAfterItCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ran := &statements{}
	writer, _, local, remote := listening(t, ran)

	var localWoken, remoteWoken bool
	require.Eventually(t, func() bool { // until both relays listen
		require.NoError(t, writer.InTx(ctx, "acme", func(tx *store.Tx) error {
			return tx.Enqueue(ctx, store.OutboxEvent{Subject: "turn.accounted.acme.s1", MsgID: time.Now().String(), Payload: []byte("{}")})
		}))
		for {
			select {
			case <-local:
				localWoken = true
				continue
			case <-remote:
				remoteWoken = true
				continue
			case <-time.After(100 * time.Millisecond):
			}
			return localWoken && remoteWoken
		}
	}, 20*time.Second, 10*time.Millisecond)

	insert := ran.index("OutboxInsert", 0)
	require.GreaterOrEqual(t, insert, 0)
	commit := ran.index("COMMIT", insert)
	require.Greater(t, commit, insert)
	require.Eventually(t, func() bool { return ran.index("OutboxNotify", 0) >= 0 }, 5*time.Second, 10*time.Millisecond)
	require.Greater(t, ran.index("OutboxNotify", 0), commit,
		"the NOTIFY is sent after the commit, not inside the transaction (where it would make notifying commits go one at a time)")
}

// TestAStoreIsWokenOnceByItsOwnCommit: the commit wakes the store's own
// relays, and its NOTIFY wakes another process's; the store's LISTEN passes
// over the NOTIFY it sent itself, which would wake its relays a second time
// for a round that finds nothing.
func TestAStoreIsWokenOnceByItsOwnCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	writer, other, local, remote := listening(t, nil)
	enqueue := func(st *store.Store) {
		require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
			return tx.Enqueue(ctx, store.OutboxEvent{Subject: "turn.accounted.acme.s1", MsgID: time.Now().String(), Payload: []byte("{}")})
		}))
	}
	heard := func(st *store.Store, ch chan struct{}) bool {
		for len(ch) > 0 {
			<-ch
		}
		enqueue(st)
		select {
		case <-ch:
			return true
		case <-time.After(100 * time.Millisecond):
			return false
		}
	}
	// Until each listens: the other process hears the writer's commits, and
	// the writer the other's (whose NOTIFY names the other store).
	require.Eventually(t, func() bool { return heard(writer, remote) && heard(other, local) }, 20*time.Second, 10*time.Millisecond)

	// Both listen now. One more commit: the other process hears of it; the
	// writer's relays are woken once, at the commit, and not again.
	for len(local) > 0 {
		<-local
	}
	enqueue(writer)
	select {
	case <-local:
	default:
		t.Fatal("the commit did not wake the writer's relays")
	}
	select {
	case <-remote:
	case <-time.After(5 * time.Second):
		t.Fatal("the NOTIFY did not wake the other process's relays")
	}
	select {
	case <-local:
		t.Fatal("the writer's relays were woken again by the NOTIFY the writer sent")
	case <-time.After(500 * time.Millisecond):
	}
}
