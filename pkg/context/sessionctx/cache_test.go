package sessionctx_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/context/sessionctx"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

const tenant = "acme"

type env struct {
	store *store.Store
	acc   *tokenaccounting.Service
}

func setup(t *testing.T) *env {
	t.Helper()
	st := pgtest.New(t)
	require.NoError(t, st.EnsureTenant(context.Background(), tenant, "Acme"))
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, time.Minute)
	require.NoError(t, err)
	acc, err := tokenaccounting.New(tokenaccounting.DefaultConfig(), st, bustest.New(t), settings, bustest.Logger(t), nil)
	require.NoError(t, err)
	return &env{store: st, acc: acc}
}

// round stores one API round: a user message whose tool result answers the
// previous round's call (from the second round on), and a response that
// calls a tool.
func (e *env) round(t *testing.T, session string, seq int64) {
	t.Helper()
	e.roundOf(t, tenant, session, seq)
}

func (e *env) roundOf(t *testing.T, tenant, session string, seq int64) {
	t.Helper()
	user := turn.Content{{Type: turn.BlockText, Text: fmt.Sprintf("step %d, please", seq)}}
	if seq > 1 {
		result := turn.Content{{Type: turn.BlockText, Text: strings.Repeat(fmt.Sprintf("output of call %d. ", seq-1), 40)}}
		user = append(turn.Content{{Type: turn.BlockToolResult, ToolUseID: fmt.Sprintf("%s-call-%d", session, seq-1), Content: &result}}, user...)
	}
	require.NoError(t, e.acc.Apply(context.Background(), turn.Event{
		Schema: turn.SchemaV1, EventID: fmt.Sprintf("%s-e%d", session, seq), TenantID: tenant, SessionID: session, Seq: seq,
		Model: "claude-sonnet-4-5", OccurredAt: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).Add(time.Duration(seq) * time.Minute),
		InputMessages: []turn.Message{{UUID: fmt.Sprintf("%s-u%d", session, seq), Role: "user", Content: user}},
		Response: &turn.Message{UUID: fmt.Sprintf("%s-a%d", session, seq), Role: "assistant", StopReason: "tool_use", Content: turn.Content{
			{Type: turn.BlockText, Text: "Running it."},
			{Type: turn.BlockToolUse, ID: fmt.Sprintf("%s-call-%d", session, seq), Name: "Bash", Input: []byte(`{"command":"make"}`)},
		}},
		Usage: &turn.Usage{InputTokens: 100 * seq, OutputTokens: 10},
	}))
}

// load reads a session's context through the cache and without it.
func (e *env) load(t *testing.T, c *sessionctx.Cache, session string) (cached, plain sessionctx.State) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, e.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		var err error
		if cached, err = c.Load(ctx, tx, session, nil); err != nil {
			return err
		}
		plain, err = sessionctx.Load(ctx, tx, session)
		return err
	}))
	return cached, plain
}

// withoutMemos is msgs with their memos dropped, to compare with messages
// read without the cache.
func withoutMemos(msgs []view.Message) []view.Message {
	out := make([]view.Message, len(msgs))
	for i, m := range msgs {
		m.Memo = nil
		out[i] = m
	}
	return out
}

func TestCacheReadsOnlyWhatWasStoredSince(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := sessionctx.NewCache(64 << 20)
	for seq := int64(1); seq <= 3; seq++ {
		e.round(t, "s1", seq)
	}
	cached, plain := e.load(t, c, "s1")
	require.Len(t, plain.Messages, 6)
	require.Equal(t, plain.Messages, withoutMemos(cached.Messages))
	require.Equal(t, sessionctx.CacheStats{Misses: 1, Fetched: 6, Bytes: c.Stats().Bytes, Sessions: 1}, c.Stats())

	// Read again with nothing new: nothing fetched.
	cached, plain = e.load(t, c, "s1")
	require.Equal(t, plain.Messages, withoutMemos(cached.Messages))
	require.EqualValues(t, 6, c.Stats().Fetched)
	require.EqualValues(t, 1, c.Stats().Hits)

	// Two more rounds: only their four messages are fetched.
	e.round(t, "s1", 4)
	e.round(t, "s1", 5)
	cached, plain = e.load(t, c, "s1")
	require.Len(t, plain.Messages, 10)
	require.Equal(t, plain.Messages, withoutMemos(cached.Messages))
	require.EqualValues(t, 10, c.Stats().Fetched)
	fresh := sessionctx.NewCache(64 << 20)
	e.load(t, fresh, "s1")
	require.Equal(t, fresh.Stats().Bytes, c.Stats().Bytes, "the cost grown read by read is the cost counted at once")

	// A reader appending to what it got does not write into the cache.
	_ = append(cached.Messages, view.Message{UUID: "intruder"})
	again, _ := e.load(t, c, "s1")
	require.Len(t, again.Messages, 10)
	require.Equal(t, plain.Messages, withoutMemos(again.Messages))
}

func TestCacheKeepsTenantsAndSessionsApartAndWithinItsBytes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for seq := int64(1); seq <= 4; seq++ {
		e.round(t, "a", seq)
		e.round(t, "b", seq)
	}
	// Room for about one of the two sessions: reading b drops a.
	one := sessionctx.NewCache(64 << 20)
	e.load(t, one, "a")
	small := sessionctx.NewCache(one.Stats().Bytes * 3 / 2)
	cached, plain := e.load(t, small, "a")
	require.Equal(t, plain.Messages, withoutMemos(cached.Messages))
	cached, plain = e.load(t, small, "b")
	require.Equal(t, plain.Messages, withoutMemos(cached.Messages))
	require.Equal(t, 1, small.Stats().Sessions)
	require.LessOrEqual(t, small.Stats().Bytes, one.Stats().Bytes*3/2)
	cached, plain = e.load(t, small, "a")
	require.Equal(t, plain.Messages, withoutMemos(cached.Messages), "a, dropped, is read whole again")
	require.EqualValues(t, 3, small.Stats().Misses)

	// A cache too small for any session keeps none and still reads right.
	none := sessionctx.NewCache(1)
	cached, plain = e.load(t, none, "a")
	require.Equal(t, plain.Messages, withoutMemos(cached.Messages))
	require.Zero(t, none.Stats().Sessions)

	// Another tenant's session of the same id is another entry.
	require.NoError(t, e.store.EnsureTenant(context.Background(), "other", "Other"))
	e.roundOf(t, "other", "a", 1)
	var other sessionctx.State
	require.NoError(t, e.store.InTx(context.Background(), "other", func(tx *store.Tx) error {
		var err error
		other, err = one.Load(context.Background(), tx, "a", nil)
		return err
	}))
	require.Len(t, other.Messages, 2, "the other tenant's session, not acme's of eight messages")
}

// TestRenderingThroughMemosIsTheSame: a context rendered from cached
// messages, whose renderings are kept between renders, encodes to the same
// bytes as one rendered from messages read afresh, after tool results are
// cleared and memories shown beside a message too.
func TestRenderingThroughMemosIsTheSame(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := sessionctx.NewCache(64 << 20)
	for seq := int64(1); seq <= 4; seq++ {
		e.round(t, "s", seq)
	}
	system := []turn.Block{{Type: turn.BlockText, Text: "memory section"}}
	check := func(cleared map[string]bool, beside map[string]turn.Content) {
		t.Helper()
		for range 2 { // the second render takes every message from its memo
			cached, plain := e.load(t, c, "s")
			want, err := assembly.Render(assembly.Input{System: system, Messages: plain.Messages, Cleared: cleared, Beside: beside}).Encode()
			require.NoError(t, err)
			rendered := assembly.Render(assembly.Input{System: system, Messages: cached.Messages, Cleared: cleared, Beside: beside})
			got, err := rendered.Encode()
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
			sys, msgs, err := rendered.EncodeParts()
			require.NoError(t, err)
			wantSys, wantMsgs, err := assembly.Render(assembly.Input{System: system, Messages: plain.Messages, Cleared: cleared, Beside: beside}).EncodeParts()
			require.NoError(t, err)
			require.Equal(t, assembly.Join(wantSys, wantMsgs), assembly.Join(sys, msgs))
		}
	}
	check(nil, nil)
	check(map[string]bool{"s-call-1": true}, nil)
	check(map[string]bool{"s-call-1": true, "s-call-2": true}, nil)
	check(map[string]bool{"s-call-1": true, "s-call-2": true}, map[string]turn.Content{
		"s-u3": {{Type: turn.BlockText, Text: "<memory>builds need the gamma toolchain</memory>"}},
	})
	// The stored messages themselves are as they were read.
	cached, plain := e.load(t, c, "s")
	require.Equal(t, plain.Messages, withoutMemos(cached.Messages))
}

// TestCacheReadsALargeSessionAPageAtATime: a session of more messages than
// a page is read whole, in order, page by page; a paced read (pages of
// 250) rests after each full page and reads the same.
func TestCacheReadsALargeSessionAPageAtATime(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const n = 4_500 // two full pages of 2,000 and a part; 18 full pages of 250
	msgs := make([]turn.Message, n)
	for i := range msgs {
		msgs[i] = turn.Message{UUID: fmt.Sprintf("m%d", i), Role: []string{"user", "assistant"}[i%2], Content: turn.Content{{Type: turn.BlockText, Text: fmt.Sprintf("message %d", i)}}}
	}
	require.NoError(t, e.acc.Apply(context.Background(), turn.Event{
		Schema: turn.SchemaV1, EventID: "big-e1", TenantID: tenant, SessionID: "big", Seq: 1,
		Model: "claude-sonnet-4-5", OccurredAt: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		InputMessages: msgs[:n-1], Response: &msgs[n-1],
	}))

	pacer := cpu.NewPacer(0, time.Millisecond) // rest at every pause
	ctx := context.Background()
	c := sessionctx.NewCache(64 << 20)
	var cached, plain sessionctx.State
	require.NoError(t, e.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		var err error
		if cached, err = c.Load(ctx, tx, "big", pacer); err != nil {
			return err
		}
		plain, err = sessionctx.Load(ctx, tx, "big")
		return err
	}))
	require.Len(t, cached.Messages, n)
	for i, m := range cached.Messages {
		require.Equal(t, fmt.Sprintf("m%d", i), m.UUID)
	}
	require.Equal(t, plain.Messages, withoutMemos(cached.Messages))
	require.EqualValues(t, n, c.Stats().Fetched)
	require.Equal(t, 18*time.Millisecond, pacer.Rested(), "a rest after each full page")
}

// TestALoadShowsTheSessionAsItWasRead: a turn applied after the session's
// row was read (in READ COMMITTED the next statement sees it) adds no
// message to that read's context, from the store or from a cache a newer
// read filled; the proxy's count of stored messages relies on it.
func TestALoadShowsTheSessionAsItWasRead(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	e.round(t, "s", 1)
	e.round(t, "s", 2)
	before, err := e.store.GetSession(ctx, tenant, "s")
	require.NoError(t, err)
	e.round(t, "s", 3) // applied after the read above
	c := sessionctx.NewCache(64 << 20)
	e.load(t, c, "s") // a newer read fills the cache with round 3 too

	for name, load := range map[string]func(tx *store.Tx) (sessionctx.State, error){
		"cached": func(tx *store.Tx) (sessionctx.State, error) { return c.LoadFor(ctx, tx, before, nil) },
		"plain":  func(tx *store.Tx) (sessionctx.State, error) { return sessionctx.LoadFor(ctx, tx, before) },
	} {
		require.NoError(t, e.store.InTx(ctx, tenant, func(tx *store.Tx) error {
			st, err := load(tx)
			require.NoError(t, err)
			require.Len(t, st.Messages, int(before.MessageCount), "%s: the messages the session's row counts", name)
			return nil
		}))
	}
	fresh, _ := e.load(t, sessionctx.NewCache(64<<20), "s")
	require.Greater(t, len(fresh.Messages), int(before.MessageCount), "round 3 did add messages")
}

// ahead reads a session's context ahead of its row, as the gateway does,
// and the same context in a transaction.
func (e *env) ahead(t *testing.T, c *sessionctx.Cache, session string) (st sessionctx.State, ok bool, plain sessionctx.State) {
	t.Helper()
	ctx := context.Background()
	reads := store.NewReads(tenant)
	row := store.Queue(reads, func(tx *store.Tx) (sessionstate.Session, error) { return tx.Session(ctx, session) })
	a := c.Ahead(ctx, reads, tenant, session)
	require.NoError(t, e.store.Read(ctx, reads))
	sess, err := row.Get()
	require.NoError(t, err)
	st, ok, err = a.State(sess)
	require.NoError(t, err)
	require.NoError(t, e.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		plain, err = sessionctx.Load(ctx, tx, session)
		return err
	}))
	return st, ok, plain
}

func TestAReadAheadIsTheContextTheTransactionReads(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := sessionctx.NewCache(64 << 20)
	for seq := int64(1); seq <= 3; seq++ {
		e.round(t, "s1", seq)
	}
	_, ok, _ := e.ahead(t, c, "s1")
	require.False(t, ok, "a session not cached yet is read in a transaction")
	e.load(t, c, "s1")

	st, ok, plain := e.ahead(t, c, "s1")
	require.True(t, ok)
	require.Equal(t, plain.Messages, withoutMemos(st.Messages))
	require.Equal(t, plain.Session, st.Session)

	// Two rounds later: their messages come with the row, and the cache
	// holds them for the next read.
	e.round(t, "s1", 4)
	e.round(t, "s1", 5)
	st, ok, plain = e.ahead(t, c, "s1")
	require.True(t, ok)
	require.Len(t, st.Messages, 10)
	require.Equal(t, plain.Messages, withoutMemos(st.Messages))
	require.EqualValues(t, 10, c.Stats().Fetched)
	cached, _ := e.load(t, c, "s1")
	require.Equal(t, plain.Messages, withoutMemos(cached.Messages))
	require.EqualValues(t, 10, c.Stats().Fetched, "nothing fetched twice")

	// A micro-compaction decision is read with them.
	require.NoError(t, e.store.InTx(context.Background(), tenant, func(tx *store.Tx) error {
		return tx.RecordReplacement(context.Background(), store.Replacement{SessionID: "s1", Kind: store.ReplaceMicrocompact, ToolUseID: "s1-call-2", Text: "[cleared]"})
	}))
	st, ok, plain = e.ahead(t, c, "s1")
	require.True(t, ok)
	require.Equal(t, map[string]bool{"s1-call-2": true}, st.Cleared)
	require.Equal(t, plain.Cleared, st.Cleared)

	// The kept point moved on (a compaction): the cache serves from there.
	ctx := context.Background()
	reads := store.NewReads(tenant)
	row := store.Queue(reads, func(tx *store.Tx) (sessionstate.Session, error) { return tx.Session(ctx, "s1") })
	a := c.Ahead(ctx, reads, tenant, "s1")
	require.NoError(t, e.store.Read(ctx, reads))
	sess, err := row.Get()
	require.NoError(t, err)
	sess.KeepFrom = 2
	st, ok, err = a.State(sess)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "s1-u2", st.Messages[0].UUID)
	require.Len(t, st.Messages, 8)
}

func TestAReadAheadOfASessionDroppedMeanwhileIsNotEnough(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	for seq := int64(1); seq <= 3; seq++ {
		e.round(t, "s1", seq)
		e.round(t, "s2", seq)
	}
	sized := sessionctx.NewCache(64 << 20)
	e.load(t, sized, "s1")
	c := sessionctx.NewCache(sized.Stats().Bytes) // room for one of them
	e.load(t, c, "s1")
	e.round(t, "s1", 4)

	reads := store.NewReads(tenant)
	row := store.Queue(reads, func(tx *store.Tx) (sessionstate.Session, error) { return tx.Session(ctx, "s1") })
	a := c.Ahead(ctx, reads, tenant, "s1")
	require.NotNil(t, a)
	require.NoError(t, e.store.Read(ctx, reads))
	e.load(t, c, "s2") // s1 leaves the cache
	sess, err := row.Get()
	require.NoError(t, err)
	_, ok, err := a.State(sess)
	require.NoError(t, err)
	require.False(t, ok, "what was read ahead starts after messages the cache no longer holds")
}
