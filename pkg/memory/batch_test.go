package memory_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// TestApplyMakesEveryChangeOrNone: a batch writes, rewrites and deletes in
// one transaction, each a revision, the index in step and then replaced;
// a batch with one failed precondition changes nothing at all, nor does
// one whose caller's own step fails.
func TestApplyMakesEveryChangeOrNone(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	for _, n := range []string{"a", "b", "c"} {
		_, err := f.mem.Write(ctx, "acme", userScope, doc(n, "about "+n, "body of "+n), byAPI, memory.Expect{})
		require.NoError(t, err)
	}
	ix, err := f.mem.Index(ctx, "acme", userScope)
	require.NoError(t, err)

	merged := doc("a", "about a and b", "body of a\nbody of b")
	fresh := doc("d", "about d", "body of d")
	index := "- [D](d.md) — new\n- [A](a.md) — merged\n"
	bad := memory.Batch{
		Edits: []memory.Edit{
			{Name: "a", Document: &merged, Expect: memory.Expect{Revision: 1}},
			{Name: "b", Expect: memory.Expect{Revision: 7}, Reason: "merged into a.md"}, // b is at revision 1
		},
	}
	_, err = f.mem.Apply(ctx, "acme", userScope, bad, byDreamer, nil)
	e, ok := memory.AsError(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, memory.ReasonRevisionMismatch, e.Reason)
	a, err := f.mem.Get(ctx, "acme", userScope, "a")
	require.NoError(t, err)
	require.EqualValues(t, 1, a.Revision, "the first edit rolled back with the second")

	good := memory.Batch{
		Edits: []memory.Edit{
			{Name: "a", Document: &merged, Expect: memory.Expect{Revision: 1}},
			{Name: "b", Expect: memory.Expect{Revision: 1}, Reason: "merged into a.md"},
			{Name: "d", Document: &fresh, Expect: memory.Expect{Absent: true}},
		},
		Index: &index, IndexRevision: ix.Revision,
	}
	boom := errors.New("the caller's record failed")
	_, err = f.mem.Apply(ctx, "acme", userScope, good, byDreamer, func(*store.Tx, memory.BatchResult) error { return boom })
	require.ErrorIs(t, err, boom)
	_, err = f.mem.Get(ctx, "acme", userScope, "d")
	require.ErrorIs(t, err, memory.ErrNotFound, "the caller's failure rolls the batch back")

	var seen memory.BatchResult
	res, err := f.mem.Apply(ctx, "acme", userScope, good, byDreamer, func(_ *store.Tx, r memory.BatchResult) error {
		seen = r
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, res, seen, "the caller's step sees the result")
	require.Len(t, res.Changed(), 3)
	require.Equal(t, []memory.Op{memory.OpUpdated, memory.OpDeleted, memory.OpCreated}, []memory.Op{res.Results[0].Op, res.Results[1].Op, res.Results[2].Op})
	require.True(t, res.Index.Changed)
	require.Equal(t, "- [D](d.md) — new\n- [A](a.md) — merged\n- [c](c.md) — about c\n", f.index(t, "acme", userScope),
		"the index as the batch wrote it, the memory it left out appended")
	revs, err := f.mem.Revisions(ctx, "acme", userScope, "b")
	require.NoError(t, err)
	require.Equal(t, memory.ActorDreamer, revs[1].Change.Actor)
	require.Equal(t, "consolidation: merged into a.md", revs[1].Change.Reason)
	f.checkInStep(t, "acme", userScope)
	require.EqualValues(t, 3, f.metrics.Sum("mnemos.memories.changed", "actor", "dreamer"), "counted once committed, the rolled back ones not")

	// An index edit made on an older index revision is refused before anything applies.
	other := doc("c", "about c, rewritten", "new body")
	_, err = f.mem.Apply(ctx, "acme", userScope, memory.Batch{
		Edits: []memory.Edit{{Name: "c", Document: &other}},
		Index: &index, IndexRevision: ix.Revision,
	}, byDreamer, nil)
	e, ok = memory.AsError(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, memory.ReasonRevisionMismatch, e.Reason)
	c, err := f.mem.Get(ctx, "acme", userScope, "c")
	require.NoError(t, err)
	require.Equal(t, "body of c", c.Body)

	// A bad document is refused before the transaction.
	broken := memory.Document{Name: "e", Description: "", Type: memory.TypeUser, Body: "x"}
	_, err = f.mem.Apply(ctx, "acme", userScope, memory.Batch{Edits: []memory.Edit{{Name: "e", Document: &broken}}}, byDreamer, nil)
	e, ok = memory.AsError(err)
	require.True(t, ok)
	require.Equal(t, memory.ReasonBadDescription, e.Reason)
	require.EqualValues(t, 1, f.metrics.Sum("mnemos.memories.refused", "reason", "bad_description"))
}
