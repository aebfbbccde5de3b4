package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/compactor"
	"github.com/mnemos-ai/mnemos/services/sessionmemory"
)

// BenchmarkSessionMemoryCompactionSavings reports what session-memory
// compaction leaves of each fixture session, compacted at its end: the
// session's notes are kept as the service keeps them (the update gate of
// the default settings applied to every round's count, each update written
// by the builtin writer), then the notes, cut to their limits, are the
// summary, the messages after the last one they cover are kept (extended
// back to ≥ 10,000 tokens and 5 text messages, ≤ 40,000), and recent files
// and the todo list are restored. It reports post-compaction tokens
// (boundary, notes, restored files, kept messages) over the estimate of the
// session's messages, like BenchmarkCompactionSavings, and no model call is
// made.
func BenchmarkSessionMemoryCompactionSavings(b *testing.B) {
	set := tenantcfg.Defaults()
	type saving struct {
		count, pre, post, notes, kept int64
		updates                       int
	}
	got := map[string]saving{}
	for b.Loop() {
		for _, c := range savingsCases {
			fs := loadFixtureSession(b, c.file, c.repeat)
			doc, last, updates := keepNotes(b, fs, set.SessionMemory)
			require.GreaterOrEqual(b, last, 0, "%s: the notes were written", c.name)
			sm := set.SessionMemory
			summary, err := sessionnotes.ForCompaction(doc.Render(), sm.TemplateText(), sm.SectionTokens, sm.TotalTokens)
			require.NoError(b, err)
			k := set.Compaction.SessionMemory
			i, err := compaction.KeepFrom(fs.msgs, fs.msgs[last].UUID, compaction.KeepLimits{MinTokens: k.MinTokens, MinTextMessages: k.MinTextMessages, MaxTokens: k.MaxTokens})
			require.NoError(b, err)
			kept := fs.msgs[i:]
			head := turn.Content{
				{Type: turn.BlockText, Text: "<mnemos:compact-boundary/>"},
				{Type: turn.BlockText, Text: compactor.SummaryText(events.MethodSessionMemory, len(kept) > 0, summary)},
			}
			head = append(head, compaction.Restore(fs.msgs, kept, compaction.RestoreLimits{}, compaction.ToolNames{})...)
			got[c.name] = saving{
				count: fs.count, pre: view.Tokens(fs.msgs), post: tokens.EstimateContent(head) + view.Tokens(kept),
				notes: (int64(len(summary)) + 3) / 4, kept: view.Tokens(kept), updates: updates,
			}
		}
	}
	for _, c := range savingsCases {
		s := got[c.name]
		b.ReportMetric(float64(s.post)/float64(s.pre), "post/pre-"+c.name)
		b.Logf("%s", fmt.Sprintf("session-memory compaction of %s: messages %d tokens before, %d after (%.3f): notes %d tokens after %d updates, kept messages %d; session count before %d",
			c.name, s.pre, s.post, float64(s.post)/float64(s.pre), s.notes, s.updates, s.kept, s.count))
	}
}

// keepNotes runs the session's rounds through the update gate as the
// session-memory service does, with the accountant's count after each
// round, and makes every due update with the builtin writer. It returns the
// notes, the index of the last message they cover (-1: none) and the
// number of updates.
func keepNotes(b *testing.B, fs fixtureSession, set tenantcfg.SessionMemory) (sessionnotes.Document, int, int) {
	b.Helper()
	doc, err := sessionnotes.ParseTemplate(set.TemplateText())
	require.NoError(b, err)
	var (
		tally     tokens.Tally
		mark      store.NotesMark
		toolCalls int64
		stored    int
		last      = -1
		updates   int
	)
	for _, ev := range fs.events {
		for _, m := range ev.InputMessages {
			tally.Add(tokens.EstimateMessage(m))
		}
		calls := 0
		if ev.Response != nil {
			calls = ev.Response.ToolUseCount()
			if ev.Usage != nil {
				tally.SetResponse(*ev.Usage, ev.Response.Content)
			} else {
				tally.Add(tokens.EstimateMessage(*ev.Response))
			}
		}
		toolCalls += int64(calls)
		stored += len(ev.Messages())
		t := store.NotesTurn{Seq: ev.Seq, Tokens: tally.Count(), ToolCallsTotal: toolCalls, ToolCalls: calls}
		if !sessionmemory.Decide(mark, t, set).Due || stored-1 <= last {
			continue
		}
		req := sessionnotes.Request(sessionnotes.UpdateInput{
			Notes: doc, Messages: sessionnotes.Recent(fs.msgs[last+1:stored], sessionnotes.DefaultMaxInputTokens),
			SectionTokens: set.SectionTokens, TotalTokens: set.TotalTokens,
		})
		resp, err := sessionnotes.Builtin(context.Background(), req)
		require.NoError(b, err)
		edits, err := sessionnotes.ParseEdits(resp.Text, doc)
		require.NoError(b, err)
		doc = sessionnotes.Apply(doc, edits)
		last, updates = stored-1, updates+1
		mark = store.NotesMark{Attempted: true, Seq: ev.Seq, Tokens: t.Tokens, ToolCalls: toolCalls}
	}
	return doc, last, updates
}
