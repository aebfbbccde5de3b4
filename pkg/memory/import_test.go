package memory_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

var byImport = memory.Change{Actor: memory.ActorImport, Reason: "import"}

func TestExportThenImportIntoAnotherScope(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	for _, d := range []memory.Document{doc("b-testing", "Tests hit a real database", "Never mocks."), doc("a-style", "Short commits", "")} {
		_, err := f.mem.Write(ctx, "acme", userScope, d, byAPI, memory.Expect{})
		require.NoError(t, err)
	}
	edited := "- [Style](a-style.md) — how commits look\n- [b-testing](b-testing.md) — Tests hit a real database\n"
	_, err := f.mem.PutIndex(ctx, "acme", userScope, edited, byAPI, 0)
	require.NoError(t, err)

	ix, docs, err := f.mem.Export(ctx, "acme", userScope, nil)
	require.NoError(t, err)
	require.Equal(t, edited, ix.Content)
	require.Equal(t, []memory.Name{"a-style", "b-testing"}, []memory.Name{docs[0].Name, docs[1].Name})

	res, err := f.mem.Import(ctx, "acme", projectScope, docs, &ix.Content, byImport, nil)
	require.NoError(t, err)
	require.Equal(t, []memory.Name{"a-style", "b-testing"}, res.Created)
	require.Equal(t, memory.IndexFromArchive, res.IndexFrom)
	require.Equal(t, edited, f.index(t, "acme", projectScope))
	revs, err := f.mem.Revisions(ctx, "acme", projectScope, "a-style")
	require.NoError(t, err)
	require.Equal(t, memory.ActorImport, revs[0].Change.Actor)

	// Again: nothing changes, no revision is made.
	res, err = f.mem.Import(ctx, "acme", projectScope, docs, &ix.Content, byImport, nil)
	require.NoError(t, err)
	require.Empty(t, res.Created)
	require.Empty(t, res.Updated)
	require.Len(t, res.Unchanged, 2)
	f.checkInStep(t, "acme", projectScope)
}

func TestImportFallsBackToTheMemoriesIndex(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, err := f.mem.Write(ctx, "acme", userScope, doc("kept", "Kept as it was", "k"), byAPI, memory.Expect{})
	require.NoError(t, err)
	bad := "- [ghost](ghost.md) — not a memory\n"
	res, err := f.mem.Import(ctx, "acme", userScope, []memory.Document{doc("kept", "Kept, updated", "k2"), doc("fresh", "New one", "n")}, &bad, byImport, nil)
	require.NoError(t, err)
	require.Equal(t, []memory.Name{"fresh"}, res.Created)
	require.Equal(t, []memory.Name{"kept"}, res.Updated)
	require.Equal(t, memory.IndexFromMemories, res.IndexFrom)
	require.Contains(t, res.IndexProblem, "ghost.md is not a memory of this scope")
	require.Equal(t, "- [kept](kept.md) — Kept, updated\n- [fresh](fresh.md) — New one\n", f.index(t, "acme", userScope))
	f.checkInStep(t, "acme", userScope)
}

func TestImportIsAllOrNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	big := doc("big", "Too big", strings.Repeat("x", 20<<10))
	_, err := f.mem.Import(ctx, "acme", userScope, []memory.Document{doc("ok", "Fine", "f"), big}, nil, byImport, nil)
	e, ok := memory.AsError(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, memory.ReasonTooLarge, e.Reason)
	require.Contains(t, e.Detail, "big.md")
	require.EqualValues(t, 1, f.metrics.Sum("mnemos.memories.refused", "actor", "import"))
	list, err := f.mem.List(ctx, "acme", userScope, memory.ListOptions{IncludeDeleted: true})
	require.NoError(t, err)
	require.Empty(t, list, "nothing is written when one file is bad")
	require.Empty(t, f.index(t, "acme", userScope))
}

func TestExportIsTheTenants(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, err := f.mem.Write(ctx, "acme", userScope, doc("secret", "Acme's", "s"), byAPI, memory.Expect{})
	require.NoError(t, err)
	ix, docs, err := f.mem.Export(ctx, "globex", userScope, nil)
	require.NoError(t, err)
	require.Empty(t, docs)
	require.Empty(t, ix.Content)
}
