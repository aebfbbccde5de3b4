package dreamer_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/consolidate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/services/dreamer"
)

// vocabulary makes texts that share few words, so only the duplicates
// seeded on purpose are near-duplicates.
func phrase(r *rand.Rand, words int) string {
	syllables := []string{"ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "xe", "zu", "pa", "qui", "dre", "fo", "gle"}
	out := make([]string, words)
	for i := range out {
		w := ""
		for range 3 {
			w += syllables[r.IntN(len(syllables))]
		}
		out[i] = w
	}
	return strings.Join(out, " ")
}

// TestBuiltinConsolidatesASeededScope: with no model, a scheduled dream of
// a scope with near-duplicates, relative dates, a dead pointer and an index
// over its byte and line limits leaves the index within its limits with no
// dead pointer, no near-duplicates, absolute dates, and every change a
// revision by the dreamer; it announces starting → updating → completed
// with the memories touched, and moves the scope's consolidation time.
func TestBuiltinConsolidatesASeededScope(t *testing.T) {
	t.Parallel()
	h := setup(t, `{"dreaming": {"min_sessions": 0}}`)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 11))
	base := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	h.clock.set(base)
	for i := range 190 {
		h.seed(fmt.Sprintf("topic-%03d", i), fmt.Sprintf("Topic %d: %s", i, phrase(r, 16)), phrase(r, 25))
	}
	for k := range 5 {
		text := phrase(r, 20)
		h.clock.set(base.Add(time.Duration(k) * time.Hour))
		h.seed(fmt.Sprintf("dup-%d", k), "Duplicate "+text[:40], "Remember: "+text+".")
		h.clock.set(base.Add(time.Duration(k+24) * time.Hour))
		h.seed(fmt.Sprintf("dup-%d-again", k), "duplicate "+strings.ToUpper(text[:40]), "remember "+text)
	}
	h.clock.set(time.Date(2026, 11, 18, 10, 0, 0, 0, time.UTC)) // a Wednesday
	h.seed("freeze", "The deploy freeze", "The freeze started yesterday and lifts next week.")
	h.clock.set(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC))
	h.seed("outage", "Last outage", "The cache outage was 3 days ago; the fix shipped today.")
	h.seed("review", "Design review", "Reviewed the schema last Monday.")
	// An index from elsewhere that points to a memory that is not there.
	require.NoError(t, h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		ix, err := tx.LockMemoryIndex(ctx, scope.String())
		if err != nil {
			return err
		}
		ix.Content = "- [gone](gone.md) — a dead pointer\n" + ix.Content
		return tx.SaveMemoryIndex(ctx, ix)
	}))
	limits := memory.DefaultLimits()
	before, err := h.memories.Index(ctx, tenant, scope)
	require.NoError(t, err)
	_, cut := memory.TruncateIndex(before.Content, limits.IndexMaxLines, limits.IndexMaxBytes)
	require.True(t, cut.Cut(), "the seeded index is over its limits")
	require.Greater(t, cut.TotalLines, limits.IndexMaxLines)
	require.Greater(t, cut.TotalBytes, limits.IndexMaxBytes)

	log := h.watch()
	provider := builtin.New(map[llm.Task]builtin.Handler{llm.TaskDreaming: consolidate.Builtin})
	svc := h.newService(fast("builtin"), provider, dreamer.Options{})
	require.NoError(t, svc.Scan(h.ctx))
	ds := h.dreams()
	require.Len(t, ds, 1)
	d := h.dream(ds[0].DreamID, "completed")
	require.Equal(t, "builtin", d.LLMProvider)
	require.Equal(t, 203, d.MemoriesLive)
	require.Equal(t, 40, d.ChangesAllowed)
	require.Equal(t, 13, d.ChangesDestructive, "5 duplicates deleted, their 5 survivors and 3 dated memories rewritten")
	require.Contains(t, d.Summary, "Done")

	// The index is within its limits, lists every memory once and nothing else.
	ix, err := h.memories.Index(ctx, tenant, scope)
	require.NoError(t, err)
	_, cut = memory.TruncateIndex(ix.Content, limits.IndexMaxLines, limits.IndexMaxBytes)
	require.False(t, cut.Cut(), "a context loads the whole index: %d lines, %d bytes", cut.TotalLines, cut.TotalBytes)
	require.Equal(t, memory.ActorDreamer, ix.Actor)
	live, err := h.memories.List(ctx, tenant, scope, memory.ListOptions{})
	require.NoError(t, err)
	require.Len(t, live, 198)
	listed := map[memory.Name]int{}
	for _, l := range ix.Lines() {
		listed[l.Name]++
	}
	require.Len(t, listed, 198)
	docs := make([]memory.Document, len(live))
	for i, m := range live {
		require.Equal(t, 1, listed[m.Name], m.Name)
		docs[i] = m.Document
	}
	require.NotContains(t, ix.Content, "gone.md", "the dead pointer is gone")
	require.Empty(t, consolidate.Clusters(docs), "no near-duplicates are left")

	// Relative dates are absolute, against each memory's own date.
	for name, want := range map[memory.Name]string{
		"freeze": "The freeze started on 2026-11-17 and lifts in the week of 2026-11-23.",
		"outage": "The cache outage was on 2026-11-17; the fix shipped on 2026-11-20.",
		"review": "Reviewed the schema on 2026-11-16.",
	} {
		m, err := h.memories.Get(ctx, tenant, scope, name)
		require.NoError(t, err)
		require.Equal(t, want, m.Body, name)
		revs, err := h.memories.Revisions(ctx, tenant, scope, name)
		require.NoError(t, err)
		last := revs[len(revs)-1]
		require.Equal(t, memory.ActorDreamer, last.Change.Actor)
		require.Equal(t, "dream "+d.DreamID, last.Change.Reason)
	}

	// Each duplicate pair is one memory under the older name, with the newer text.
	for k := range 5 {
		m, err := h.memories.Get(ctx, tenant, scope, memory.Name(fmt.Sprintf("dup-%d", k)))
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(m.Body, "remember "), m.Body)
		_, err = h.memories.Get(ctx, tenant, scope, memory.Name(fmt.Sprintf("dup-%d-again", k)))
		require.ErrorIs(t, err, memory.ErrNotFound)
		revs, err := h.memories.Revisions(ctx, tenant, scope, memory.Name(fmt.Sprintf("dup-%d-again", k)))
		require.NoError(t, err)
		last := revs[len(revs)-1]
		require.Equal(t, memory.OpDeleted, last.Op)
		require.Equal(t, memory.ActorDreamer, last.Change.Actor)
		require.Equal(t, fmt.Sprintf("dream %s: merged into dup-%d.md", d.DreamID, k), last.Change.Reason)
	}
	untouched, err := h.memories.Revisions(ctx, tenant, scope, "topic-007")
	require.NoError(t, err)
	require.Len(t, untouched, 1, "a memory with nothing to fix keeps its revision")

	evs := log.of(t, d.DreamID, "completed")
	require.Equal(t, []string{"starting", "updating", "completed"}, states(evs))
	done := evs[2]
	require.Len(t, done.Deleted, 5)
	require.Len(t, done.Written, 8)
	require.Len(t, done.Memories, 13)
	require.Equal(t, "builtin", done.LLMProvider)
	require.Eventually(t, func() bool { return h.metrics.Sum("mnemos.dreams", "outcome", "completed") == 1 }, 10*time.Second, 10*time.Millisecond)

	s := h.scopeState()
	require.WithinDuration(t, time.Now(), s.LastConsolidatedAt, time.Minute, "the consolidation time moved")
	require.Empty(t, s.LeaseHolder, "the lease is free")

	// The next scan finds the scope consolidated within 24 hours.
	require.NoError(t, svc.Scan(h.ctx))
	require.Len(t, h.dreams(), 1)
}
