package compaction_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// section returns the body of the n-th (1-based) section of a summary.
func section(t *testing.T, summary string, n int) string {
	t.Helper()
	headings := compaction.Headings()
	title := fmt.Sprintf("## %d. %s\n", n, headings[n-1])
	_, body, ok := strings.Cut(summary, title)
	require.True(t, ok, "section %q in\n%s", title, summary)
	if n < len(headings) {
		body, _, ok = strings.Cut(body, fmt.Sprintf("\n## %d. %s\n", n+1, headings[n]))
		require.True(t, ok)
	}
	return strings.TrimSuffix(body, "\n")
}

func workSession() []view.Message {
	todos := map[string]any{"todos": []map[string]any{
		{"content": "Write the parser", "status": "completed", "activeForm": "Writing the parser"},
		{"content": "Test the parser", "status": "in_progress", "activeForm": "Testing the parser"},
		{"content": "Document it", "status": "pending", "activeForm": "Documenting it"},
	}}
	return numbered(
		user(1, text("Build a CSV parser in parse.go.")),
		assistant(1, thinking("plan"), text("Reading first."),
			toolUse("r1", "Read", map[string]any{"file_path": "/src/parse.go"}),
			toolUse("g1", "Grep", map[string]any{"pattern": "csv", "path": "/src"})),
		user(2, toolResult("r1", "package parse"), toolResult("g1", "no matches")),
		assistant(2, toolUse("td1", "TodoWrite", map[string]any{"todos": []map[string]any{{"content": "old item", "status": "pending"}}}),
			toolUse("e1", "Edit", map[string]any{"file_path": "/src/parse.go", "old_string": "a", "new_string": "b"}),
			toolUse("w1", "Write", map[string]any{"file_path": "/src/parse_test.go", "content": "package parse"}),
			toolUse("n1", "NotebookEdit", map[string]any{"notebook_path": "/nb/demo.ipynb"})),
		user(3, toolResult("td1", "ok"), toolResult("e1", "ok"), toolResult("w1", "ok"), toolResult("n1", "ok")),
		assistant(3, toolUse("b1", "Bash", map[string]any{"command": "go test ./..."}), toolUse("td2", "TodoWrite", todos)),
		user(4, toolError("b1", "FAIL: TestParse\nexit status 1"), toolResult("td2", "ok"), image()),
		user(4, text("Also handle quoted fields."), image()),
		assistant(4, text("Fixing quotes now."), toolUse("r2", "Read", map[string]any{"file_path": "/src/quote.go"})),
		user(5, toolError("r2", "no such file")),
		assistant(5, text("The file does not exist; I will create it.")),
	)
}

func TestExtractiveSections(t *testing.T) {
	t.Parallel()

	got := compaction.Extractive(workSession(), compaction.ExtractLimits{})
	require.True(t, strings.HasPrefix(got, compaction.ExtractiveNote))

	require.Equal(t, "The first request in this part of the conversation:\nBuild a CSV parser in parse.go.", section(t, got, 1))
	require.Equal(t, "Tools used, with the number of calls:\n- Read: 2\n- TodoWrite: 2\n- Bash: 1\n- Edit: 1\n- Grep: 1\n- NotebookEdit: 1\n- Write: 1",
		section(t, got, 2))
	require.Equal(t, "Files touched:\n- /src/parse.go (read, edited)\n- /src/parse_test.go (written)\n- /nb/demo.ipynb (edited)\n- /src/quote.go (read)",
		section(t, got, 3), "a failed read still names the file it tried; the grep path is no file")
	require.Equal(t, "Tool calls that failed:\n- Bash: FAIL: TestParse\nexit status 1\n- Read /src/quote.go: no such file", section(t, got, 4))
	require.Equal(t, "Shell commands run, in order:\n- go test ./...", section(t, got, 5))
	require.Equal(t, "- Build a CSV parser in parse.go.\n- Also handle quoted fields.", section(t, got, 6))
	require.Equal(t, "Open items of the latest todo list:\n- [~] Test the parser (in progress)\n- [ ] Document it", section(t, got, 7))
	require.Equal(t, "The agent's latest message:\nThe file does not exist; I will create it.", section(t, got, 8))
	require.Equal(t, "Continue with the user's latest request, quoted:\n> Also handle quoted fields.", section(t, got, 9))

	// Deterministic.
	require.Equal(t, got, compaction.Extractive(workSession(), compaction.ExtractLimits{}))
}

func TestExtractiveEmpty(t *testing.T) {
	t.Parallel()

	got := compaction.Extractive(nil, compaction.ExtractLimits{})
	for i := range compaction.Headings() {
		require.Equal(t, "None recorded.", section(t, got, i+1))
	}
}

func TestExtractiveToolNames(t *testing.T) {
	t.Parallel()

	msgs := numbered(
		user(1, text("go")),
		assistant(1,
			toolUse("a", "view_file", map[string]any{"path": "/x/view.go"}),
			toolUse("b", "Read", map[string]any{"file_path": "/x/read.go"}),
			toolUse("c", "apply_patch", map[string]any{"file_path": "/x/patch.go"}),
			toolUse("d", "shell", map[string]any{"command": "make"}),
			toolUse("e", "Bash", map[string]any{"command": "ls"}),
			toolUse("f", "plan", map[string]any{"todos": []map[string]any{{"content": "ship", "status": "pending"}}}),
		),
	)
	got := compaction.Extractive(msgs, compaction.ExtractLimits{Tools: compaction.ToolNames{
		Read: []string{"view_file"}, Edit: []string{"apply_patch"}, Shell: []string{"shell"}, Todo: []string{"plan"},
	}})
	require.Equal(t, "Files touched:\n- /x/view.go (read)\n- /x/patch.go (edited)", section(t, got, 3))
	require.Equal(t, "Shell commands run, in order:\n- make", section(t, got, 5))
	require.Equal(t, "Open items of the latest todo list:\n- [ ] ship", section(t, got, 7))

	// An empty list means the tenant has no such tool; nil means the default.
	got = compaction.Extractive(msgs, compaction.ExtractLimits{Tools: compaction.ToolNames{Read: []string{}}})
	require.Equal(t, "None recorded.", section(t, got, 3), "no read tool, and apply_patch is no default edit tool")
}

func TestExtractiveBounds(t *testing.T) {
	t.Parallel()

	long := strings.Repeat("é", 1500) // 3,000 bytes
	tests := []struct {
		name string
		msgs []view.Message
		lim  compaction.ExtractLimits
		// check looks at the user messages section.
		check func(t *testing.T, sec string)
	}{
		{
			name: "a long message is cut on a rune boundary at 2,000 bytes",
			msgs: numbered(user(1, text(long))),
			check: func(t *testing.T, sec string) {
				item := strings.TrimPrefix(sec, "- ")
				require.LessOrEqual(t, len(item), 2000)
				require.Greater(t, len(item), 1990)
				require.Equal(t, compaction.Clip(long, 2000), item)
				require.True(t, strings.HasPrefix(long, strings.Split(item, "\n")[0]))
				require.Contains(t, item, "[… truncated: ")
				require.True(t, strings.HasSuffix(item, "more bytes]"))
			},
		},
		{
			name: "a message at the bound is whole",
			msgs: numbered(user(1, text(strings.Repeat("a", 2000)))),
			check: func(t *testing.T, sec string) {
				require.Equal(t, "- "+strings.Repeat("a", 2000), sec)
			},
		},
		{
			name: "100 messages of 1,000 bytes: the first and the 38 most recent",
			msgs: func() []view.Message {
				var out []view.Message
				for i := range 100 {
					out = append(out, user(int64(i+1), text(fmt.Sprintf("m%03d ", i)+strings.Repeat("x", 995))))
				}
				return numbered(out...)
			}(),
			check: func(t *testing.T, sec string) {
				// Lines of 1,002 bytes plus a newline; the note for 100 is 37 bytes:
				// (40,000 − 37 − 1,003) / 1,003 = 38 recent ones after the first.
				require.LessOrEqual(t, len(sec), 40_000)
				lines := strings.Split(sec, "\n")
				require.Len(t, lines, 40)
				require.True(t, strings.HasPrefix(lines[0], "- m000 "))
				require.Equal(t, "[… 61 user messages left out here]", lines[1])
				require.True(t, strings.HasPrefix(lines[2], "- m062 "))
				require.True(t, strings.HasPrefix(lines[39], "- m099 "))
			},
		},
		{
			name: "custom bounds",
			msgs: numbered(user(1, text("first message")), user(2, text(strings.Repeat("b", 50))), user(3, text("last"))),
			lim:  compaction.ExtractLimits{MessageChars: 40, UserMessagesChars: 60},
			check: func(t *testing.T, sec string) {
				// The lines take 15 + 42 + 6 bytes and 2 newlines: 65 > 60. The
				// note for 3 takes 35, leaving 25: the first (15+1) and the
				// last (6+1) fit, the 40-byte cut of the b's does not.
				require.Equal(t, "- first message\n[… 1 user messages left out here]\n- last", sec)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := compaction.Extractive(tt.msgs, tt.lim)
			require.LessOrEqual(t, len(got), compaction.DefaultTotalChars)
			tt.check(t, section(t, got, 6))
		})
	}
}

func TestClip(t *testing.T) {
	t.Parallel()

	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 5, "hello"},
		{"hello", 10, "hello"},
		{"", 0, ""},
		{"hello", 0, ""},
		{"hello", 3, "hel"}, // too small for the marker: only cut
		{"hé", 2, "h"},      // never half a rune
		// The marker for 100 bytes is 32 bytes long, for 81 only 31: 19 bytes are kept.
		{strings.Repeat("a", 100), 50, strings.Repeat("a", 19) + "\n[… truncated: 81 more bytes]"},
		// 21 bytes would be left, but 20 end on a rune boundary.
		{strings.Repeat("é", 50), 52, strings.Repeat("é", 10) + "\n[… truncated: 80 more bytes]"},
	}
	for _, tt := range tests {
		got := compaction.Clip(tt.s, tt.n)
		require.Equal(t, tt.want, got, "clip(%q, %d)", tt.s, tt.n)
		require.LessOrEqual(t, len(got), max(tt.n, 0))
	}
}

func TestExtractiveTotalBound(t *testing.T) {
	t.Parallel()

	var msgs []view.Message
	big := strings.Repeat("z", 9000)
	for i := range 300 {
		r := int64(i + 1)
		msgs = append(msgs,
			user(r, text(fmt.Sprintf("request %d ", i)+big)),
			assistant(r, text(big+big),
				toolUse(fmt.Sprintf("r%d", i), "Read", map[string]any{"file_path": fmt.Sprintf("/very/long/path/to/somewhere/deep/file_%04d.go", i)}),
				toolUse(fmt.Sprintf("b%d", i), "Bash", map[string]any{"command": fmt.Sprintf("run %d ", i) + big}),
				toolUse(fmt.Sprintf("t%d", i), fmt.Sprintf("Tool%03d", i), nil),
			),
			user(r, toolError(fmt.Sprintf("b%d", i), big)),
		)
	}
	got := compaction.Extractive(numbered(msgs...), compaction.ExtractLimits{})
	require.LessOrEqual(t, len(got), compaction.DefaultTotalChars)
	latest := compaction.Clip("request 299 "+big, compaction.DefaultMessageChars)
	require.Equal(t, "Continue with the user's latest request, quoted:\n> "+strings.ReplaceAll(latest, "\n", "\n> "), section(t, got, 9),
		"the sections fit: the total bound did not cut the end")
	for i := range compaction.Headings() {
		section(t, got, i+1)
	}
	require.Contains(t, section(t, got, 9), "> request 299 ")
	require.Contains(t, section(t, got, 3), "file_0000.go")
	require.Contains(t, section(t, got, 3), "file_0299.go")
	require.LessOrEqual(t, len(section(t, got, 3)), compaction.DefaultListChars+len("Files touched:\n"))

	// Tiny totals still hold.
	for _, total := range []int{1, 100, 1000} {
		require.LessOrEqual(t, len(compaction.Extractive(numbered(msgs...), compaction.ExtractLimits{TotalChars: total})), total)
	}
}

// On every fixture session, the extractive summary holds every user message
// (in its bounded form) and every file read, edited or written.
func TestExtractiveFixtures(t *testing.T) {
	t.Parallel()

	names := compaction.DefaultToolNames()
	fileTools := append(append(append([]string{}, names.Read...), names.Edit...), names.Write...)
	for _, fc := range fixtureContexts(t) {
		t.Run(fc.name, func(t *testing.T) {
			t.Parallel()
			got := compaction.Extractive(fc.messages, compaction.ExtractLimits{})
			require.LessOrEqual(t, len(got), compaction.DefaultTotalChars)
			require.Equal(t, got, compaction.Extractive(fc.messages, compaction.ExtractLimits{}))

			users, files := 0, 0
			for _, m := range fc.messages {
				var texts []string
				for _, b := range m.Content {
					if m.Role == "user" && b.Type == turn.BlockText && strings.TrimSpace(b.Text) != "" {
						texts = append(texts, b.Text)
					}
					if b.Type == turn.BlockToolUse && contains(fileTools, b.Name) {
						var in struct {
							FilePath string `json:"file_path"`
						}
						require.NoError(t, json.Unmarshal(b.Input, &in))
						require.Contains(t, section(t, got, 3), in.FilePath)
						files++
					}
				}
				if len(texts) > 0 {
					require.Contains(t, section(t, got, 6), "- "+compaction.Clip(strings.Join(texts, "\n\n"), compaction.DefaultMessageChars))
					users++
				}
			}
			require.Positive(t, users)
			t.Logf("%d user messages, %d file tool calls", users, files)
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestBuiltinSummarizer(t *testing.T) {
	t.Parallel()

	// Through Summarize, the builtin answer is the extractive summary of
	// the same messages, focused on the request's instructions.
	msgs := workSession()
	// No two messages of one role in a row: the request would merge them.
	msgs = append(msgs[:7:7], msgs[8:]...)
	msgs[6].Content = turn.Content{toolError("b1", "FAIL"), toolResult("td2", "ok"), text("Also handle quoted fields.")}
	p := &fakeProvider{fn: compaction.BuiltinSummarizer}
	sum, err := compaction.Summarize(t.Context(), p, compaction.SummaryInput{Messages: msgs, Instructions: "Keep the quoted fields."})
	require.NoError(t, err)
	require.Equal(t, "builtin", sum.Model)
	require.Equal(t, compaction.Extractive(msgs, compaction.ExtractLimits{Focus: "Keep the quoted fields."}), sum.Text)
	require.Contains(t, sum.Text, "- Also handle quoted fields.")

	// Starting with the assistant and an orphan result: the stand-ins the
	// request adds are not taken for user messages.
	tail := numbered(
		assistant(3, toolUse("x", "Bash", map[string]any{"command": "make"})),
		user(4, toolError("gone", "orphan failure"), toolResult("x", "built")),
		assistant(4, text("Built."), toolUse("y", "Read", map[string]any{"file_path": "/late.go"})),
	)
	sum, err = compaction.Summarize(t.Context(), p, compaction.SummaryInput{Messages: tail})
	require.NoError(t, err)
	require.Equal(t, "None recorded.", section(t, sum.Text, 6))
	require.Equal(t, "Tool calls that failed:\n- A tool call: orphan failure", section(t, sum.Text, 4))
	require.Equal(t, "Files touched:\n- /late.go (read)", section(t, sum.Text, 3))

	// Recovering a request gives back the transcript.
	req := compaction.RequestMessages(tail, "x")
	back, custom := compaction.RecoverMessages(req)
	require.Equal(t, "x", custom, "the custom instructions come back too")
	require.Len(t, back, 4)
	require.Equal(t, "assistant", back[0].Role)
	orphan := toolError("", "orphan failure")
	require.Equal(t, turn.Content{toolResult("x", "built"), orphan}, back[1].Content)
	require.Equal(t, turn.Content{toolResult("y", compaction.MissingResult)}, back[3].Content)

	// A canceled context is an error.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = compaction.BuiltinSummarizer(ctx, llm.Request{Task: llm.TaskCompaction})
	require.ErrorIs(t, err, context.Canceled)
}
