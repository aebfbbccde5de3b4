package memory_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

type fixture struct {
	db      *store.Store
	mem     *memory.Store
	metrics *telemetrytest.Reader
	clock   *fakeClock
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func setup(t *testing.T) *fixture {
	t.Helper()
	db := pgtest.New(t)
	ctx := context.Background()
	for _, tn := range []string{"acme", "globex"} {
		require.NoError(t, db.EnsureTenant(ctx, tn, tn))
	}
	metrics := telemetrytest.New(t)
	clock := &fakeClock{t: time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)}
	mem, err := memory.NewStore(db, metrics.Meter(), memory.Options{Now: clock.now})
	require.NoError(t, err)
	return &fixture{db: db, mem: mem, metrics: metrics, clock: clock}
}

var (
	userScope    = memory.Scope{Kind: memory.KindUser, ID: "u-42"}
	projectScope = memory.Scope{Kind: memory.KindProject, ID: "repo-x"}
	byExtractor  = memory.Change{Actor: memory.ActorExtractor, Reason: "user turn", SourceTurns: []string{"ev-1"}}
	byDreamer    = memory.Change{Actor: memory.ActorDreamer, Reason: "consolidation"}
	byAPI        = memory.Change{Actor: memory.ActorAPI, Reason: "operator"}
)

func doc(name, description, body string) memory.Document {
	return memory.Document{Name: memory.Name(name), Description: description, Type: memory.TypeFeedback, Body: body}
}

func (f *fixture) index(t *testing.T, tenant string, scope memory.Scope) string {
	t.Helper()
	ix, err := f.mem.Index(context.Background(), tenant, scope)
	require.NoError(t, err)
	return ix.Content
}

// checkInStep checks that the index lists every live memory exactly once
// and nothing else.
func (f *fixture) checkInStep(t *testing.T, tenant string, scope memory.Scope) {
	t.Helper()
	ctx := context.Background()
	live, err := f.mem.List(ctx, tenant, scope, memory.ListOptions{})
	require.NoError(t, err)
	want := map[memory.Name]bool{}
	for _, m := range live {
		want[m.Name] = true
	}
	ix, err := f.mem.Index(ctx, tenant, scope)
	require.NoError(t, err)
	got := map[memory.Name]bool{}
	for _, l := range ix.Lines() {
		require.False(t, got[l.Name], "%s listed twice", l.Name)
		got[l.Name] = true
	}
	require.Equal(t, want, got, "index and memories in step")
	require.Equal(t, len(ix.Lines()), strings.Count(ix.Content, "\n"), "every stored line parses")
}

func TestWriteUpdateDeleteKeepTheIndexInStep(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()

	res, err := f.mem.Write(ctx, "acme", userScope, doc("testing", "Tests hit a real database", "Use pgtest."), byExtractor, memory.Expect{})
	require.NoError(t, err)
	require.Equal(t, memory.OpCreated, res.Op)
	require.EqualValues(t, 1, res.Memory.Revision)
	require.Equal(t, f.clock.now(), res.Memory.CreatedAt)
	require.Equal(t, "- [testing](testing.md) — Tests hit a real database\n", f.index(t, "acme", userScope))

	_, err = f.mem.Write(ctx, "acme", userScope, doc("role", "Data scientist, new to Go", "Explain Go idioms."), byExtractor, memory.Expect{})
	require.NoError(t, err)
	f.clock.advance(time.Hour)
	res, err = f.mem.Write(ctx, "acme", userScope, doc("testing", "Integration tests hit a real database", "Use pgtest.\n\n**Why:** mocks hid a bug."), byExtractor, memory.Expect{})
	require.NoError(t, err)
	require.Equal(t, memory.OpUpdated, res.Op)
	require.EqualValues(t, 2, res.Memory.Revision)
	require.Equal(t, f.clock.now(), res.Memory.UpdatedAt)
	require.Equal(t, f.clock.now().Add(-time.Hour), res.Memory.CreatedAt, "an update keeps the creation time")
	require.Equal(t, "- [testing](testing.md) — Integration tests hit a real database\n- [role](role.md) — Data scientist, new to Go\n",
		f.index(t, "acme", userScope), "a default hook follows the new description; the order stays")

	res, err = f.mem.Write(ctx, "acme", userScope, doc("testing", "Integration tests hit a real database", "Use pgtest.\n\n**Why:** mocks hid a bug.\n\n"), byExtractor, memory.Expect{})
	require.NoError(t, err)
	require.False(t, res.Changed(), "the same content again makes no revision")
	require.EqualValues(t, 2, res.Memory.Revision)

	// An edited hook stays when the memory changes.
	_, err = f.mem.PutIndex(ctx, "acme", userScope, "- [Role](role.md) — who the user is\n- [Testing](testing.md) — real DB\n", byDreamer, 0)
	require.NoError(t, err)
	_, err = f.mem.Write(ctx, "acme", userScope, doc("testing", "Tests use a real database", "Use pgtest."), byExtractor, memory.Expect{})
	require.NoError(t, err)
	require.Equal(t, "- [Role](role.md) — who the user is\n- [Testing](testing.md) — real DB\n", f.index(t, "acme", userScope))

	res, err = f.mem.Delete(ctx, "acme", userScope, "role", byDreamer, memory.Expect{})
	require.NoError(t, err)
	require.Equal(t, memory.OpDeleted, res.Op)
	require.True(t, res.Memory.Deleted())
	require.Equal(t, "- [Testing](testing.md) — real DB\n", f.index(t, "acme", userScope))
	_, err = f.mem.Get(ctx, "acme", userScope, "role")
	require.ErrorIs(t, err, memory.ErrNotFound)
	require.ErrorIs(t, err, memory.ErrDeleted, "told apart from a memory never written")
	_, err = f.mem.Delete(ctx, "acme", userScope, "role", byDreamer, memory.Expect{})
	require.ErrorIs(t, err, memory.ErrNotFound, "a deleted memory cannot be deleted again")
	require.ErrorIs(t, err, memory.ErrDeleted)
	_, err = f.mem.Get(ctx, "acme", userScope, "never-written")
	require.ErrorIs(t, err, memory.ErrNotFound)
	require.NotErrorIs(t, err, memory.ErrDeleted)
	all, err := f.mem.List(ctx, "acme", userScope, memory.ListOptions{IncludeDeleted: true})
	require.NoError(t, err)
	require.Len(t, all, 2, "deletion is soft")
	f.checkInStep(t, "acme", userScope)

	require.EqualValues(t, 2, f.metrics.Sum("mnemos.memories.changed", "op", "created"))
	require.EqualValues(t, 2, f.metrics.Sum("mnemos.memories.changed", "op", "updated"))
	require.EqualValues(t, 1, f.metrics.Sum("mnemos.memories.changed", "op", "deleted"))
	require.EqualValues(t, 4, f.metrics.Sum("mnemos.memories.changed", "actor", "extractor"))
}

func TestRevisionsDiffAndRollback(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	write := func(body string) {
		f.clock.advance(time.Minute)
		_, err := f.mem.Write(ctx, "acme", projectScope, doc("deploys", "How deploys are frozen", body), byExtractor, memory.Expect{})
		require.NoError(t, err)
	}
	write("Deploys freeze on Fridays.")                          // 1
	write("Deploys freeze on Fridays.\nHotfixes need sign-off.") // 2
	write("Deploys freeze from 2026-12-20 to 2027-01-05.")       // 3
	f.clock.advance(time.Minute)
	_, err := f.mem.Delete(ctx, "acme", projectScope, "deploys", byDreamer, memory.Expect{}) // 4
	require.NoError(t, err)

	revs, err := f.mem.Revisions(ctx, "acme", projectScope, "deploys")
	require.NoError(t, err)
	require.Len(t, revs, 4)
	require.Equal(t, []memory.Op{memory.OpCreated, memory.OpUpdated, memory.OpUpdated, memory.OpDeleted},
		[]memory.Op{revs[0].Op, revs[1].Op, revs[2].Op, revs[3].Op})
	require.Equal(t, byExtractor, revs[0].Change, "who, why and from which turns")
	require.Equal(t, memory.ActorDreamer, revs[3].Change.Actor)
	require.True(t, revs[3].Deleted)
	require.Equal(t, revs[2].Body, revs[3].Body, "a deletion keeps the content it deleted")

	diff, err := f.mem.Diff(ctx, "acme", projectScope, "deploys", 1, 2)
	require.NoError(t, err)
	require.Equal(t, `--- deploys.md@1
+++ deploys.md@2
@@ -5,3 +5,4 @@
 ---
 
 Deploys freeze on Fridays.
+Hotfixes need sign-off.
`, diff)
	diff, err = f.mem.Diff(ctx, "acme", projectScope, "deploys", 3, 4)
	require.NoError(t, err)
	require.Contains(t, diff, "-Deploys freeze from 2026-12-20 to 2027-01-05.")
	require.NotContains(t, diff[strings.Index(diff, "@@"):], "\n+", "a deletion diffs as everything removed")
	_, err = f.mem.Diff(ctx, "acme", projectScope, "deploys", 1, 9)
	require.ErrorIs(t, err, memory.ErrNotFound)

	// Roll the deleted memory back to revision 2: it is live again, with
	// that content, as a new revision.
	f.clock.advance(time.Minute)
	res, err := f.mem.Rollback(ctx, "acme", projectScope, "deploys", 2, byAPI, memory.Expect{Revision: 4})
	require.NoError(t, err)
	require.Equal(t, memory.OpRestored, res.Op)
	require.EqualValues(t, 5, res.Memory.Revision)
	require.EqualValues(t, 2, res.RestoredFrom)
	require.False(t, res.Memory.Deleted())
	require.Equal(t, revs[1].Document, res.Memory.Document)
	got, err := f.mem.Get(ctx, "acme", projectScope, "deploys")
	require.NoError(t, err)
	require.Equal(t, revs[1].Document, got.Document)
	require.Equal(t, "- [deploys](deploys.md) — How deploys are frozen\n", f.index(t, "acme", projectScope))

	// Every revision can be gone back to, the deletion too.
	for _, to := range []int64{1, 3, 2, 4, 1} {
		res, err := f.mem.Rollback(ctx, "acme", projectScope, "deploys", to, byAPI, memory.Expect{})
		require.NoError(t, err, "to %d", to)
		want := revs[to-1]
		if want.Deleted {
			require.Equal(t, memory.OpDeleted, res.Op)
			_, err := f.mem.Get(ctx, "acme", projectScope, "deploys")
			require.ErrorIs(t, err, memory.ErrNotFound)
		} else {
			require.Equal(t, memory.OpRestored, res.Op)
			got, err := f.mem.Get(ctx, "acme", projectScope, "deploys")
			require.NoError(t, err)
			require.Equal(t, want.Document, got.Document, "to %d", to)
		}
		f.checkInStep(t, "acme", projectScope)
	}
	res, err = f.mem.Rollback(ctx, "acme", projectScope, "deploys", 1, byAPI, memory.Expect{})
	require.NoError(t, err)
	require.False(t, res.Changed(), "rolling back to the state it is in makes no revision")
	revs, err = f.mem.Revisions(ctx, "acme", projectScope, "deploys")
	require.NoError(t, err)
	require.Len(t, revs, 10)
	require.EqualValues(t, 1, revs[9].RestoredFrom)

	_, err = f.mem.Rollback(ctx, "acme", projectScope, "deploys", 42, byAPI, memory.Expect{})
	require.ErrorIs(t, err, memory.ErrNotFound)
	_, err = f.mem.Rollback(ctx, "acme", projectScope, "never", 1, byAPI, memory.Expect{})
	require.ErrorIs(t, err, memory.ErrNotFound)
	require.EqualValues(t, 5, f.metrics.Sum("mnemos.memories.changed", "op", "restored"))
}

func TestExpectAndRefusals(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, err := f.mem.Write(ctx, "acme", userScope, doc("a", "first", "x"), byAPI, memory.Expect{Absent: true})
	require.NoError(t, err)
	_, err = f.mem.Write(ctx, "acme", userScope, doc("a", "second", "x"), byAPI, memory.Expect{Absent: true})
	require.Equal(t, memory.ReasonRevisionMismatch, reasonOf(t, err))
	_, err = f.mem.Write(ctx, "acme", userScope, doc("a", "second", "x"), byAPI, memory.Expect{Revision: 7})
	require.Equal(t, memory.ReasonRevisionMismatch, reasonOf(t, err))
	_, err = f.mem.Write(ctx, "acme", userScope, doc("a", "second", "x"), byAPI, memory.Expect{Revision: 1})
	require.NoError(t, err)

	bad := []struct {
		doc    memory.Document
		change memory.Change
		want   memory.Reason
	}{
		{doc("../b", "d", "x"), byAPI, memory.ReasonOutOfScope},
		{doc("B", "d", "x"), byAPI, memory.ReasonBadName},
		{memory.Document{Name: "b", Description: "d", Type: "opinion"}, byAPI, memory.ReasonBadType},
		{doc("b", "", "x"), byAPI, memory.ReasonBadDescription},
		{doc("b", "two\nlines", "x"), byAPI, memory.ReasonBadDescription},
		{doc("b", "d", strings.Repeat("x", 20_000)), byAPI, memory.ReasonTooLarge},
		{doc("b", "d", "x"), memory.Change{Actor: "someone"}, memory.ReasonBadChange},
		{doc("b", "d", "x"), memory.Change{Actor: memory.ActorAgent}, memory.ReasonBadChange},
	}
	for _, c := range bad {
		_, err := f.mem.Write(ctx, "acme", userScope, c.doc, c.change, memory.Expect{})
		require.Equal(t, c.want, reasonOf(t, err), "%+v", c.doc)
	}
	_, err = f.mem.Write(ctx, "acme", memory.Scope{}, doc("b", "d", "x"), byAPI, memory.Expect{})
	require.Equal(t, memory.ReasonBadScope, reasonOf(t, err))
	_, err = f.mem.PutIndex(ctx, "acme", userScope, "- [gone](gone.md) — x\n", byDreamer, 0)
	require.Equal(t, memory.ReasonBadIndex, reasonOf(t, err))
	_, err = f.mem.PutIndex(ctx, "acme", userScope, "", byDreamer, 99)
	require.Equal(t, memory.ReasonRevisionMismatch, reasonOf(t, err))

	for _, r := range []memory.Reason{memory.ReasonOutOfScope, memory.ReasonBadName, memory.ReasonBadType, memory.ReasonTooLarge, memory.ReasonBadScope, memory.ReasonBadIndex} {
		require.EqualValues(t, 1, f.metrics.Sum("mnemos.memories.refused", "reason", string(r)), r)
	}
	require.EqualValues(t, 3, f.metrics.Sum("mnemos.memories.refused", "reason", string(memory.ReasonRevisionMismatch)))
	require.EqualValues(t, 2, f.metrics.Sum("mnemos.memories.refused", "reason", string(memory.ReasonBadDescription)))
	f.checkInStep(t, "acme", userScope)
	list, err := f.mem.List(ctx, "acme", userScope, memory.ListOptions{IncludeDeleted: true})
	require.NoError(t, err)
	require.Len(t, list, 1, "nothing refused was stored")
}

func TestPutIndexRepairsMissingAndRefusesDangling(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	for _, n := range []string{"a", "b", "c"} {
		_, err := f.mem.Write(ctx, "acme", userScope, doc(n, "about "+n, "x"), byExtractor, memory.Expect{})
		require.NoError(t, err)
	}
	before, err := f.mem.Index(ctx, "acme", userScope)
	require.NoError(t, err)
	res, err := f.mem.PutIndex(ctx, "acme", userScope, "- [C](c.md) — c first\n- [A](a.md) — then a\n", byDreamer, before.Revision)
	require.NoError(t, err)
	require.True(t, res.Changed)
	require.Equal(t, []memory.Name{"b"}, res.Appended)
	require.Equal(t, "- [C](c.md) — c first\n- [A](a.md) — then a\n- [b](b.md) — about b\n", res.Index.Content)
	require.Equal(t, before.Revision+1, res.Index.Revision)
	require.Equal(t, memory.ActorDreamer, res.Index.Actor)

	_, err = f.mem.PutIndex(ctx, "acme", userScope, "- [C](c.md) — c first\n", byDreamer, before.Revision)
	require.Equal(t, memory.ReasonRevisionMismatch, reasonOf(t, err), "an edit of an older index is refused")

	_, err = f.mem.Delete(ctx, "acme", userScope, "a", byDreamer, memory.Expect{})
	require.NoError(t, err)
	_, err = f.mem.PutIndex(ctx, "acme", userScope, "- [C](c.md) — c first\n- [A](a.md) — then a\n- [b](b.md) — b\n", byDreamer, 0)
	require.Equal(t, memory.ReasonBadIndex, reasonOf(t, err), "a line for a deleted memory is a dangling pointer")
	require.Equal(t, "- [C](c.md) — c first\n- [b](b.md) — about b\n", f.index(t, "acme", userScope), "a refused edit changes nothing")
	f.checkInStep(t, "acme", userScope)
}

func TestConcurrentWritersKeepTheIndexInStep(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := range 8 {
				name := fmt.Sprintf("m%d", (w*3+i)%10)
				var err error
				switch i % 4 {
				case 3:
					_, err = f.mem.Delete(ctx, "acme", userScope, memory.Name(name), byDreamer, memory.Expect{})
					if err != nil && strings.Contains(err.Error(), "not found") {
						err = nil
					}
				default:
					_, err = f.mem.Write(ctx, "acme", userScope, doc(name, fmt.Sprintf("writer %d step %d", w, i), "x"), byExtractor, memory.Expect{})
				}
				require.NoError(t, err)
			}
		})
	}
	wg.Wait()
	f.checkInStep(t, "acme", userScope)
}

func TestTenantsAndScopesAreApart(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, err := f.mem.Write(ctx, "acme", userScope, doc("secret", "acme's", "x"), byAPI, memory.Expect{})
	require.NoError(t, err)
	_, err = f.mem.Get(ctx, "globex", userScope, "secret")
	require.ErrorIs(t, err, memory.ErrNotFound)
	_, err = f.mem.Get(ctx, "acme", projectScope, "secret")
	require.ErrorIs(t, err, memory.ErrNotFound, "a memory lives in one scope")
	_, err = f.mem.Revisions(ctx, "globex", userScope, "secret")
	require.ErrorIs(t, err, memory.ErrNotFound)
	_, err = f.mem.Delete(ctx, "globex", userScope, "secret", byAPI, memory.Expect{})
	require.ErrorIs(t, err, memory.ErrNotFound)
	require.Empty(t, f.index(t, "globex", userScope))
}

func TestHeadersAreMostRecentFirst(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	for _, n := range []string{"old", "mid", "new"} {
		f.clock.advance(time.Hour)
		_, err := f.mem.Write(ctx, "acme", userScope, doc(n, "about "+n, "body of "+n), byExtractor, memory.Expect{})
		require.NoError(t, err)
	}
	f.clock.advance(time.Hour)
	_, err := f.mem.Write(ctx, "acme", userScope, doc("old", "about old, revised", "body"), byExtractor, memory.Expect{})
	require.NoError(t, err)
	heads, err := f.mem.Headers(ctx, "acme", userScope, 2)
	require.NoError(t, err)
	require.Len(t, heads, 2)
	require.Equal(t, memory.Name("old"), heads[0].Name, "sorted by update time")
	require.Equal(t, memory.Name("new"), heads[1].Name)
	require.Equal(t, f.clock.now(), heads[0].UpdatedAt)
	require.Equal(t, f.clock.now().Add(-3*time.Hour), heads[0].CreatedAt)
}

func TestAgentWritesMarkTheirSession(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	require.NoError(t, f.db.InTx(ctx, "acme", func(tx *store.Tx) error {
		s, err := tx.LockSession(ctx, "s1", "main")
		if err != nil {
			return err
		}
		s.AppliedSeq, s.MessageCount, s.State = 7, 15, "ok"
		return tx.SaveSessions(ctx, s)
	}))
	_, err := f.mem.AgentWrite(ctx, "acme", "s1")
	require.ErrorIs(t, err, memory.ErrNotFound)

	agent := memory.Change{Actor: memory.ActorAgent, SessionID: "s1", Reason: "the user asked to remember"}
	_, err = f.mem.Write(ctx, "acme", userScope, doc("pref", "Prefers tabs", "x"), agent, memory.Expect{})
	require.NoError(t, err)
	w, err := f.mem.AgentWrite(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Equal(t, memory.AgentWrite{SessionID: "s1", At: f.clock.now(), Seq: 7, Position: 15, Writes: 1}, w)

	// Not yet accounted sessions are marked too, at seq 0.
	_, err = f.mem.Write(ctx, "acme", userScope, doc("pref2", "Prefers spaces", "x"), memory.Change{Actor: memory.ActorAgent, SessionID: "fresh"}, memory.Expect{})
	require.NoError(t, err)
	w, err = f.mem.AgentWrite(ctx, "acme", "fresh")
	require.NoError(t, err)
	require.Zero(t, w.Seq)

	f.clock.advance(time.Minute)
	_, err = f.mem.Delete(ctx, "acme", userScope, "pref", agent, memory.Expect{})
	require.NoError(t, err)
	w, err = f.mem.AgentWrite(ctx, "acme", "s1")
	require.NoError(t, err)
	require.EqualValues(t, 2, w.Writes)
	require.Equal(t, f.clock.now(), w.At)

	_, err = f.mem.Write(ctx, "acme", userScope, doc("other", "by the extractor", "x"), memory.Change{Actor: memory.ActorExtractor, SessionID: "s2"}, memory.Expect{})
	require.NoError(t, err)
	_, err = f.mem.AgentWrite(ctx, "acme", "s2")
	require.ErrorIs(t, err, memory.ErrNotFound, "only the agent's own writes mark a session")
	_, err = f.mem.AgentWrite(ctx, "globex", "s1")
	require.ErrorIs(t, err, memory.ErrNotFound)
}

func TestFrozenSectionStaysUntilTheNextCompaction(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, err := f.mem.Write(ctx, "acme", userScope, doc("first", "the first memory", "x"), byExtractor, memory.Expect{})
	require.NoError(t, err)
	require.NoError(t, f.db.InTx(ctx, "acme", func(tx *store.Tx) error {
		_, err := tx.LockSession(ctx, "s1", "main")
		return err
	}))
	scope := map[string]string{"user": "u-42", "project": "repo-x"}
	section := func(compaction string, keepsPrefix bool) []string {
		var out []string
		require.NoError(t, f.db.InTx(ctx, "acme", func(tx *store.Tx) error {
			var err error
			out, err = memory.FrozenSection(ctx, tx, memory.SessionSection{SessionID: "s1", MemoryScope: scope, CompactionID: compaction, KeepsPrefix: keepsPrefix}, memory.DefaultLimits())
			return err
		}))
		return out
	}
	first := section("", false)
	require.Len(t, first, 3)
	require.Contains(t, first[1], "- [first](first.md) — the first memory")
	require.Contains(t, first[2], "no memories saved in this scope yet")

	_, err = f.mem.Write(ctx, "acme", userScope, doc("second", "the second memory", "x"), byExtractor, memory.Expect{})
	require.NoError(t, err)
	require.Equal(t, first, section("", false), "a memory written meanwhile does not change the section")

	afterFrom := section("c-from", true)
	require.Equal(t, first, afterFrom, "a compaction that keeps the prefix keeps the section")

	next := section("c-2", false)
	require.Contains(t, next[1], "- [second](second.md) — the second memory", "the next compaction renders it again")
	require.Equal(t, next, section("c-2", false))

	var none []string
	require.NoError(t, f.db.InTx(ctx, "acme", func(tx *store.Tx) error {
		if _, err := tx.LockSession(ctx, "s2", "main"); err != nil {
			return err
		}
		var err error
		none, err = memory.FrozenSection(ctx, tx, memory.SessionSection{SessionID: "s2"}, memory.DefaultLimits())
		return err
	}))
	require.Empty(t, none, "a session that names no scope has no memory section")
}
