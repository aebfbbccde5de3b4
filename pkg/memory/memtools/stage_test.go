package memtools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/memtools"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// TestStagingChangesNothingUntilApplied: a staging executor checks every
// call as the store would and answers as if it had made it — later reads,
// lists and the index see the run's changes — but the store stays as it
// was; Staged hands back one batch (final contents, the revisions they were
// made on, deletions, the index without deleted lines) and counts the live
// memories deleted or rewritten; applying it makes the changes.
func TestStagingChangesNothingUntilApplied(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	for _, n := range []string{"a", "b", "c", "d"} {
		f.seed(t, scope, n, "about "+n, "body of "+n)
	}
	var changes []string
	ex, err := memtools.New(f.mem, binding(memory.ActorDreamer), memtools.Options{
		Stage: true,
		OnChange: func(_ context.Context, op memory.Op, n memory.Name) {
			changes = append(changes, string(op)+":"+string(n))
		},
	})
	require.NoError(t, err)

	res := run(t, ex, memtools.ToolEdit, map[string]any{"name": "a", "old_string": "body of a", "new_string": "body of a\nbody of b"})
	require.False(t, res.IsError, res.Text)
	require.Contains(t, res.Text, "staged")
	res = run(t, ex, memtools.ToolDelete, map[string]any{"name": "b", "reason": "merged into a.md"})
	require.False(t, res.IsError, res.Text)
	res = run(t, ex, memtools.ToolWrite, map[string]any{"name": "e", "description": "about e", "type": "project", "body": "new"})
	require.False(t, res.IsError, res.Text)
	res = run(t, ex, memtools.ToolWrite, map[string]any{"name": "tmp", "description": "scratch", "type": "project", "body": "x"})
	require.False(t, res.IsError, res.Text)
	res = run(t, ex, memtools.ToolDelete, map[string]any{"name": "tmp"})
	require.False(t, res.IsError, res.Text, "a memory created in the run can be deleted in it")
	res = run(t, ex, memtools.ToolWrite, map[string]any{"name": "c", "description": "about c", "type": "feedback", "body": "body of c"})
	require.Contains(t, res.Text, "nothing changed", "writing what is there stages nothing")

	// Refused as the store would refuse.
	res = run(t, ex, memtools.ToolWrite, map[string]any{"name": "f", "description": "", "type": "project", "body": "x"})
	require.True(t, res.IsError)
	require.Contains(t, res.Text, "bad_description")
	res = run(t, ex, memtools.ToolDelete, map[string]any{"name": "b"})
	require.True(t, res.IsError, "b is deleted in this run")
	res = run(t, ex, memtools.ToolIndexWrite, map[string]any{"content": "- [B](b.md) — gone\n"})
	require.True(t, res.IsError, "the index may not point to a memory the run deleted")

	// Reads see the run's changes.
	res = run(t, ex, memtools.ToolRead, map[string]any{"name": "a"})
	require.Contains(t, res.Text, "body of a\nbody of b")
	require.Contains(t, res.Text, "changed in this run from revision 1")
	res = run(t, ex, memtools.ToolRead, map[string]any{"name": "b"})
	require.True(t, res.IsError)
	res = run(t, ex, memtools.ToolList, map[string]any{})
	require.Contains(t, res.Text, "- e.md [project] changed in this run: about e")
	require.NotContains(t, res.Text, "b.md")
	require.NotContains(t, res.Text, "tmp.md")
	res = run(t, ex, memtools.ToolIndexRead, map[string]any{})
	require.Equal(t, "- [a](a.md) — about a\n- [c](c.md) — about c\n- [d](d.md) — about d\n- [e](e.md) — about e\n", res.Text)
	res = run(t, ex, memtools.ToolIndexWrite, map[string]any{"content": "- [E](e.md) — new\n- [A](a.md) — merged\n"})
	require.False(t, res.IsError, res.Text)
	require.Contains(t, res.Text, "appended: c.md, d.md")
	res = run(t, ex, memtools.ToolDelete, map[string]any{"name": "d"})
	require.False(t, res.IsError, res.Text)

	// The store is untouched.
	all, err := f.mem.List(ctx, "acme", scope, memory.ListOptions{})
	require.NoError(t, err)
	require.Len(t, all, 4)
	for _, m := range all {
		require.EqualValues(t, 1, m.Revision, m.Name)
	}
	require.Empty(t, ex.Written(), "nothing was made")
	require.Equal(t, []string{"updated:a", "deleted:b", "created:e", "created:tmp", "deleted:tmp", "updated:", "deleted:d"}, changes)

	staged := ex.Staged()
	require.Equal(t, []memory.Name{"a", "e"}, staged.Written)
	require.Equal(t, []memory.Name{"b", "d"}, staged.Deleted)
	require.Equal(t, []memory.Name{"a"}, staged.Rewritten)
	require.Equal(t, 3, staged.Destructive())
	require.Len(t, staged.Batch.Edits, 4)
	require.Equal(t, memory.Expect{Revision: 1}, staged.Batch.Edits[0].Expect)
	require.Equal(t, "merged into a.md", staged.Batch.Edits[1].Reason)
	require.Equal(t, memory.Expect{Absent: true}, staged.Batch.Edits[2].Expect)
	require.Equal(t, "- [E](e.md) — new\n- [A](a.md) — merged\n- [c](c.md) — about c\n", *staged.Batch.Index, "the deleted d left the staged index")

	_, err = f.mem.Apply(ctx, "acme", scope, staged.Batch, memory.Change{Actor: memory.ActorDreamer, Reason: "dream"}, nil)
	require.NoError(t, err)
	ix, err := f.mem.Index(ctx, "acme", scope)
	require.NoError(t, err)
	require.Equal(t, "- [E](e.md) — new\n- [A](a.md) — merged\n- [c](c.md) — about c\n", ix.Content)
	a, err := f.mem.Get(ctx, "acme", scope, "a")
	require.NoError(t, err)
	require.Equal(t, "body of a\nbody of b", a.Body)
}

// TestExtraToolsAndTidyIndex: a caller's own tool is offered and run beside
// the memory tools; TidyIndex stages a clean index when the stored one
// points to a memory that is not there.
func TestExtraToolsAndTidyIndex(t *testing.T) {
	t.Parallel()
	db, f := setupDB(t)
	ctx := context.Background()
	f.seed(t, scope, "a", "about a", "x")
	f.seed(t, scope, "b", "about b", "y")
	var got string
	echo := memtools.Tool{
		Def: llm.Tool{Name: "echo", Description: "Echo.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		Run: func(_ context.Context, in json.RawMessage) (memtools.Result, error) {
			got = string(in)
			return memtools.Result{Text: "echoed"}, nil
		},
	}
	ex, err := memtools.New(f.mem, binding(memory.ActorDreamer), memtools.Options{Stage: true, Extra: []memtools.Tool{echo}})
	require.NoError(t, err)
	tools, err := ex.Tools(ctx)
	require.NoError(t, err)
	require.Equal(t, "echo", tools[len(tools)-1].Name)
	res := run(t, ex, "echo", map[string]any{"q": 1})
	require.Equal(t, "echoed", res.Text)
	require.JSONEq(t, `{"q":1}`, got)
	res = run(t, ex, "memory_shell", map[string]any{})
	require.True(t, res.IsError)
	require.Contains(t, res.Text, "echo")
	_, err = memtools.New(f.mem, binding(memory.ActorDreamer), memtools.Options{Extra: []memtools.Tool{{Def: llm.Tool{Name: memtools.ToolRead}, Run: echo.Run}}})
	require.Error(t, err, "an extra tool may not take a memory tool's name")

	tidied, err := ex.TidyIndex(ctx)
	require.NoError(t, err)
	require.False(t, tidied, "a tidy index is left alone")
	// An index from elsewhere that points to a memory that is not there.
	require.NoError(t, db.InTx(ctx, "acme", func(tx *store.Tx) error {
		ix, err := tx.LockMemoryIndex(ctx, scope.String())
		if err != nil {
			return err
		}
		ix.Content += "- [gone](gone.md) — a dead pointer\n"
		return tx.SaveMemoryIndex(ctx, ix)
	}))
	tidied, err = ex.TidyIndex(ctx)
	require.NoError(t, err)
	require.True(t, tidied)
	staged := ex.Staged()
	require.Equal(t, "- [a](a.md) — about a\n- [b](b.md) — about b\n", *staged.Batch.Index)
	_, err = f.mem.Apply(ctx, "acme", scope, staged.Batch, memory.Change{Actor: memory.ActorDreamer}, nil)
	require.NoError(t, err)
	ix, err := f.mem.Index(ctx, "acme", scope)
	require.NoError(t, err)
	require.False(t, strings.Contains(ix.Content, "gone.md"))
}

// TestReadAndListAnswersParseBack: what memory_read and memory_list answer
// reads back into the memory and the names.
func TestReadAndListAnswersParseBack(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed(t, scope, "role", "Data scientist: new to Go", "Explain Go idioms.\n\n---\nnot a fence")
	f.seed(t, scope, "style", "'quoted' description", "x")
	ex, err := memtools.New(f.mem, binding(memory.ActorDreamer), memtools.Options{})
	require.NoError(t, err)
	res := run(t, ex, memtools.ToolList, map[string]any{})
	require.ElementsMatch(t, []memory.Name{"role", "style"}, memtools.ParseList(res.Text))
	res = run(t, ex, memtools.ToolRead, map[string]any{"name": "role"})
	m, err := memtools.ParseRead(res.Text)
	require.NoError(t, err)
	stored, err := f.mem.Get(context.Background(), "acme", scope, "role")
	require.NoError(t, err)
	require.Equal(t, stored.Document, m.Document)
	require.EqualValues(t, 1, m.Revision)
	require.WithinDuration(t, stored.UpdatedAt, m.UpdatedAt, 1e9)
	_, err = memtools.ParseRead("Not found: no such memory")
	require.Error(t, err)
}
