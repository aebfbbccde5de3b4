package bench

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/llm/anthropic"
	"github.com/mnemos-ai/mnemos/pkg/retention"
	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/compactor"
)

// retentionMethods are the compactions BenchmarkCompactionRetention scores,
// in the order it reports them.
var retentionMethods = []string{events.MethodSessionMemory, events.MethodFull, events.MethodExtractive}

// BenchmarkCompactionRetention reports the retention score (pkg/retention)
// of each fixture session compacted at its end three ways, as the
// compactor builds each: with its session notes (kept as in
// BenchmarkSessionMemoryCompactionSavings, the messages after the last one
// they cover kept, recent files restored), with a model summary (the real
// Anthropic client against a scripted server whose summary keeps only part:
// the first request, the files the agent read and its latest answer — see
// partialModel), and with the extractive summary (recent files and the
// todo list restored). It logs every category's found/total and reports
// the overall score of each; the extractive summary and the session notes
// must keep every instruction of the user's and the latest request.
func BenchmarkCompactionRetention(b *testing.B) {
	ctx := context.Background()
	srv := llmtest.NewAnthropicServer(b, partialModel)
	provider, err := anthropic.New(anthropic.Config{APIKey: "bench-key", BaseURL: srv.URL})
	require.NoError(b, err)
	set := tenantcfg.Defaults()
	type row struct {
		score    retention.Score
		replaced int
	}
	got := map[string]row{}
	for b.Loop() {
		for _, c := range savingsCases {
			fs := loadFixtureSession(b, c.file, c.repeat)
			restored := compaction.Restore(fs.msgs, nil, compaction.RestoreLimits{}, compaction.ToolNames{})

			// Session memory: the notes, then the messages they do not cover.
			doc, last, _ := keepNotes(b, fs, set.SessionMemory)
			require.GreaterOrEqual(b, last, 0, "%s: the notes were written", c.name)
			sm := set.SessionMemory
			notes, err := sessionnotes.ForCompaction(doc.Render(), sm.TemplateText(), sm.SectionTokens, sm.TotalTokens)
			require.NoError(b, err)
			k := set.Compaction.SessionMemory
			i, err := compaction.KeepFrom(fs.msgs, fs.msgs[last].UUID, compaction.KeepLimits{MinTokens: k.MinTokens, MinTextMessages: k.MinTextMessages, MaxTokens: k.MaxTokens})
			require.NoError(b, err)
			kept := fs.msgs[i:]
			head := compactionHead(events.MethodSessionMemory, len(kept) > 0, notes, compaction.Restore(fs.msgs, kept, compaction.RestoreLimits{}, compaction.ToolNames{}))
			got[c.name+"/"+events.MethodSessionMemory] = row{retention.Of(fs.msgs[:i], head, kept, compaction.ToolNames{}), i}

			// Full: the scripted model's summary.
			sum, err := compaction.Summarize(ctx, provider, compaction.SummaryInput{Tenant: "bench", Messages: fs.msgs})
			require.NoError(b, err)
			head = compactionHead(events.MethodFull, false, sum.Text, restored)
			got[c.name+"/"+events.MethodFull] = row{retention.Of(fs.msgs, head, nil, compaction.ToolNames{}), len(fs.msgs)}

			// Extractive.
			head = compactionHead(events.MethodExtractive, false, compaction.Extractive(fs.msgs, compaction.ExtractLimits{}), restored)
			got[c.name+"/"+events.MethodExtractive] = row{retention.Of(fs.msgs, head, nil, compaction.ToolNames{}), len(fs.msgs)}
		}
	}
	for _, c := range savingsCases {
		for _, m := range retentionMethods {
			r := got[c.name+"/"+m]
			var cells []string
			for _, cat := range retention.Categories() {
				t := r.score.Categories[cat]
				cells = append(cells, fmt.Sprintf("%s %d/%d", cat, t.Found, t.Total))
			}
			b.ReportMetric(r.score.Overall, "retention-"+m+"-"+c.name)
			b.Logf("%s", fmt.Sprintf("%s %s: %d messages replaced; retention %.3f: %s", c.name, m, r.replaced, r.score.Overall, strings.Join(cells, ", ")))
			for _, it := range r.score.Missing {
				b.Logf("%s", fmt.Sprintf("  lost %s: %q", it.Category, compaction.OneLine(it.Text, 120)))
			}
			if m == events.MethodFull {
				continue
			}
			for _, cat := range []string{retention.Instructions, retention.LastRequest} {
				t := r.score.Categories[cat]
				require.Equal(b, t.Total, t.Found, "%s %s keeps every item of %s", c.name, m, cat)
			}
		}
	}
}

// BenchmarkRetentionScore times the score alone: the extraction from the
// largest fixture session (long.jsonl replayed twice, about 300,000
// tokens of messages) and the search of its extractive compaction.
func BenchmarkRetentionScore(b *testing.B) {
	fs := loadFixtureSession(b, "long.jsonl", 2)
	restored := compaction.Restore(fs.msgs, nil, compaction.RestoreLimits{}, compaction.ToolNames{})
	head := compactionHead(events.MethodExtractive, false, compaction.Extractive(fs.msgs, compaction.ExtractLimits{}), restored)
	b.ResetTimer()
	for b.Loop() {
		retention.Of(fs.msgs, head, nil, compaction.ToolNames{})
	}
}

// compactionHead is the head message a compaction makes: the boundary, the
// summary as introduced to the model, and what is restored.
func compactionHead(method string, keptFollow bool, summary string, restored []turn.Block) []view.Message {
	content := turn.Content{
		{Type: turn.BlockText, Text: "<mnemos:compact-boundary/>"},
		{Type: turn.BlockText, Text: compactor.SummaryText(method, keptFollow, summary)},
	}
	return []view.Message{{Position: -1, Role: "user", Content: append(content, restored...)}}
}

var filePathRe = regexp.MustCompile(`"file_path":"([^"]+)"`)

// partialModel answers a summary request the way a model that keeps only
// part would: the first user message as the intent, the files its Read
// calls named, the agent's latest text as the current work, and a next
// step in its own words. It leaves out the user's later messages, the
// errors and the todo list.
func partialModel(req llmtest.Request) llmtest.Reply {
	first, latest := "", ""
	var files []string
	seen := map[string]bool{}
	for i, m := range req.Messages {
		if i == 0 {
			first, _, _ = strings.Cut(m.Text, "\n[tool_result")
		}
		if m.Role == "assistant" {
			for _, line := range strings.Split(m.Text, "\n") {
				if line != "" && !strings.HasPrefix(line, "[tool_use") {
					latest = line
				}
			}
		}
		for _, f := range filePathRe.FindAllStringSubmatch(m.Text, -1) {
			if !seen[f[1]] {
				seen[f[1]] = true
				files = append(files, f[1])
			}
		}
	}
	var s strings.Builder
	s.WriteString("<analysis>Scripted: keeps the first request and the files.</analysis>\n<summary>\n")
	fmt.Fprintf(&s, "## 1. Primary Request and Intent\n%s\n\n## 3. Files and Code Sections\n", strings.TrimSpace(first))
	for _, f := range files {
		fmt.Fprintf(&s, "- %s\n", f)
	}
	fmt.Fprintf(&s, "\n## 8. Current Work\n%s\n\n## 9. Optional Next Step\nCarry on with what the user asked last.\n</summary>", latest)
	return llmtest.Text(s.String())
}
