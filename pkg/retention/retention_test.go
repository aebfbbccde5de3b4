package retention_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/retention"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func text(s string) turn.Block { return turn.Block{Type: turn.BlockText, Text: s} }

func toolUse(id, name string, input map[string]any) turn.Block {
	raw, _ := json.Marshal(input)
	return turn.Block{Type: turn.BlockToolUse, ID: id, Name: name, Input: raw}
}

func result(id, s string, isError bool) turn.Block {
	c := turn.Content{text(s)}
	return turn.Block{Type: turn.BlockToolResult, ToolUseID: id, Content: &c, IsError: isError}
}

// span gives the messages positions, as stored ones (a message at -1 stays
// one a compaction made).
func span(msgs ...view.Message) []view.Message {
	for i := range msgs {
		if msgs[i].Position == 0 {
			msgs[i].Position = int64(i)
		}
	}
	return msgs
}

func user(blocks ...turn.Block) view.Message {
	return view.Message{Role: "user", Content: blocks}
}

func assistant(blocks ...turn.Block) view.Message {
	return view.Message{Role: "assistant", Content: blocks}
}

func todos(items ...[2]string) map[string]any {
	var list []map[string]any
	for _, it := range items {
		list = append(list, map[string]any{"content": it[0], "status": it[1], "activeForm": it[0]})
	}
	return map[string]any{"todos": list}
}

// workSpan is a span of a made-up session with one or more items of every
// category, and text that must give none.
func workSpan() []view.Message {
	head := user(text("<mnemos:compact-boundary/>"), text("Never deploy on Fridays."))
	head.Position = -1 // made by an earlier compaction: not scored again
	return span(
		head,
		user(text("Add a `--dry-run` flag to cmd/mnemos/main.go. Don't touch the migrations; always run gofmt before committing. The CI is slow today.")),
		assistant(text("I will look at ParseConfig first."),
			toolUse("r1", "Read", map[string]any{"file_path": "/repo/pkg/config/config.go"}),
			toolUse("b1", "Bash", map[string]any{"command": "go test ./pkg/config"}),
			toolUse("r2", "Read", map[string]any{"file_path": "/repo/missing.txt"}),
			toolUse("t1", "TodoWrite", todos([2]string{"Write the flag", "pending"}))),
		user(result("r1", "package config\n// ERROR: this line is file content, not an error", false),
			result("b1", "ok  \tgithub.com/x/pkg/a\n--- FAIL: TestParseConfig (0.00s)\n    config_test.go:12: error: unexpected EOF\nFAIL\nFAIL\tgithub.com/x/pkg/config\n", false),
			result("r2", "\nopen /repo/missing.txt: no such file or directory\nsecond line", true),
			result("t1", "Todos have been modified successfully.", false)),
		user(text("No, use ParseConfigV2 instead of ParseConfig. What does load_defaults return?"),
			text("<system-reminder>Always answer in French.</system-reminder>")),
		user(text("<command-name>/clear</command-name>\n<command-args>Remove the tests.</command-args>")),
		user(text("Here is the log:\n```\nRemove everything under /var/lib/app/cache now.\n```\nThe flag goes in `Options`.")),
		assistant(text("Noted."), toolUse("t2", "TodoWrite", todos(
			[2]string{"Write the flag", "completed"},
			[2]string{"Test the flag with go test", "in_progress"},
			[2]string{"Document the flag in docs/cli.md", "pending"}))),
		user(result("t2", "ok", false)),
		user(text("Please also update the docs.")),
	)
}

type item struct{ Category, Text string }

func items(list []retention.Item) []item {
	out := make([]item, len(list))
	for i, it := range list {
		out[i] = item{it.Category, it.Text}
	}
	return out
}

func TestExtractFindsWhatMustSurvive(t *testing.T) {
	t.Parallel()
	got := items(retention.Extract(workSpan(), compaction.ToolNames{}))
	require.Equal(t, []item{
		{retention.Instructions, "Add a `--dry-run` flag to cmd/mnemos/main.go."},
		{retention.Instructions, "Don't touch the migrations;"},
		{retention.Instructions, "always run gofmt before committing."}, // "not run gofmt" is no match
		{retention.Instructions, "No, use ParseConfigV2 instead of ParseConfig."},
		{retention.Instructions, "Please also update the docs."},
		{retention.LastRequest, "Please also update the docs."},
		{retention.Files, "cmd/mnemos/main.go"},
		{retention.Files, "/repo/pkg/config/config.go"},
		{retention.Files, "/repo/missing.txt"},
		{retention.Errors, "--- FAIL: TestParseConfig (0.00s)"},
		{retention.Errors, "config_test.go:12: error: unexpected EOF"},
		{retention.Errors, "FAIL\tgithub.com/x/pkg/config"},
		{retention.Errors, "open /repo/missing.txt: no such file or directory"},
		{retention.Todos, "Test the flag with go test"},
		{retention.Todos, "Document the flag in docs/cli.md"},
		{retention.Identifiers, "--dry-run"},
		{retention.Identifiers, "ParseConfigV2"},
		{retention.Identifiers, "ParseConfig"}, // a word of its own: "ParseConfigV2" does not hold it
		{retention.Identifiers, "load_defaults"},
		{retention.Identifiers, "Options"},
	}, got)
}

func TestMeasureIsTolerantToCaseSpaceAndMarkupNotToParaphrase(t *testing.T) {
	t.Parallel()
	summary := strings.Join([]string{
		"## 1. Primary Request and Intent",
		"ADD A `--DRY-RUN` FLAG TO cmd/mnemos/main.go.",
		`The user said: "don't   touch`,
		`> the Migrations" and asked to not run gofmt by hand.`,
		"## 3. Files and Code Sections",
		"- pkg/config/config.go (read)",
		"## 4. Errors and Fixes",
		"- **config_test.go:12:** error: unexpected\tEOF",
		"## 6. All User Messages",
		"- The user wants ParseConfigV2 used.",
		"## 7. Pending Tasks",
		"- [~] Test the flag with go test (in progress)",
	}, "\n")
	head := []view.Message{{Position: -1, Role: "user", Content: turn.Content{
		text("<mnemos:compact-boundary/>"), text(summary), text("Todo list:\n- [ ] Document the flag in docs/cli.md"),
	}}}
	kept := span(user(text("Please also update the docs.")))

	s := retention.Measure(retention.Extract(workSpan(), compaction.ToolNames{}), head, kept)
	require.Equal(t, map[string]retention.Tally{
		retention.Instructions: {Found: 3, Total: 5},
		retention.LastRequest:  {Found: 1, Total: 1},
		retention.Files:        {Found: 2, Total: 3},
		retention.Errors:       {Found: 1, Total: 4},
		retention.Todos:        {Found: 2, Total: 2},
		retention.Identifiers:  {Found: 2, Total: 5},
	}, s.Categories)
	require.InDelta(t, (3.0/5+1+2.0/3+1.0/4+1+2.0/5)/6, s.Overall, 1e-12, "the mean of the categories' shares")
	require.Equal(t, []item{
		{retention.Instructions, "always run gofmt before committing."}, // "not run gofmt" is no match
		{retention.Instructions, "No, use ParseConfigV2 instead of ParseConfig."},
		{retention.Files, "/repo/missing.txt"},
		{retention.Errors, "--- FAIL: TestParseConfig (0.00s)"},
		{retention.Errors, "FAIL\tgithub.com/x/pkg/config"},
		{retention.Errors, "open /repo/missing.txt: no such file or directory"},
		{retention.Identifiers, "ParseConfig"}, // a word of its own: "ParseConfigV2" does not hold it
		{retention.Identifiers, "load_defaults"},
		{retention.Identifiers, "Options"},
	}, items(s.Missing))
}

func TestNothingToKeepScoresOne(t *testing.T) {
	t.Parallel()
	only := span(user(text("What does this do?")), assistant(text("It parses.")))
	only[0].Content = turn.Content{text("<system-reminder>Use tabs.</system-reminder>")}
	require.Empty(t, retention.Extract(only, compaction.ToolNames{}), "a reminder is not the user's")

	s := retention.Measure(nil, nil)
	require.Equal(t, 1.0, s.Overall)
	detail, err := s.Detail()
	require.NoError(t, err)
	require.JSONEq(t, `{"instructions":{"found":0,"total":0},"last_request":{"found":0,"total":0},"files":{"found":0,"total":0},
		"errors":{"found":0,"total":0},"todos":{"found":0,"total":0},"identifiers":{"found":0,"total":0}}`, string(detail))
}

func TestALongLatestRequestIsMatchedOnItsOpening(t *testing.T) {
	t.Parallel()
	long := "Summarize the report below for the team. " + strings.Repeat("The numbers went up again. ", 80)
	got := retention.Extract(span(user(text(long))), compaction.ToolNames{})
	require.Equal(t, retention.LastRequest, got[1].Category)
	require.Greater(t, len(long), 2_000)
	require.Equal(t, 1, retention.Measure(got[1:2], span(user(text(long[:1_100])))).Categories[retention.LastRequest].Found,
		"its opening 1,000 bytes of words are enough")
	require.Zero(t, retention.Measure(got[1:2], span(user(text(long[:500])))).Categories[retention.LastRequest].Found)
}

func TestTheTenantsToolNames(t *testing.T) {
	t.Parallel()
	msgs := span(
		assistant(toolUse("s1", "Shell", map[string]any{"cmd": "make"}), toolUse("p1", "Plan", map[string]any{"todos": []map[string]any{{"content": "Ship it", "status": "pending"}}})),
		user(result("s1", "make: *** [all] Error 2", false), result("p1", "ok", false)),
	)
	require.Empty(t, retention.Extract(msgs, compaction.ToolNames{}), "unknown tools: neither shell output nor a todo list")
	got := items(retention.Extract(msgs, compaction.ToolNames{Shell: []string{"Shell"}, Todo: []string{"Plan"}}))
	require.Equal(t, []item{{retention.Errors, "make: *** [all] Error 2"}, {retention.Todos, "Ship it"}}, got)
}

func TestIsInstruction(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"Use an agent for the search.":                     true,
		"Now read the worker and cron logs too.":           true,
		"Please, rename it.":                               true,
		"1. Run the migrations first.":                     true,
		"- never push to main":                             true,
		"We should keep the old API":                       true,
		"You must not log the token.":                      true,
		"I want the output as CSV.":                        true,
		"No, the other file.":                              true,
		"Actually the bug is in the parser.":               true,
		"Could you check the cache?":                       true,
		"Let's split this function.":                       true,
		"Use sqlc instead of hand-written queries":         true,
		"Make sure the tests pass":                         true,
		"One line for the incident report, please.":        true,
		"What does greet.sh print?":                        false,
		"Do the totals match?":                             false,
		"The logs are from last night.":                    false,
		"No errors were found in the build.":               false,
		"Thanks.":                                          false,
		"Fix":                                              false, // one word: nothing a summary could be checked for
		"And with the argument Ada?":                       false,
		"It reads NOTES.md and sums the monthly files up.": false,
	} {
		require.Equal(t, want, retention.IsInstruction(s), s)
	}
}

func TestIsPath(t *testing.T) {
	t.Parallel()
	for w, want := range map[string]bool{
		"/etc/hosts":             true,
		"~/notes/todo.txt":       true,
		"./run.sh":               true,
		"../x/y":                 true,
		"cmd/mnemos/main.go":     true,
		"logs/web-1.log":         true,
		"pkg/store/internal":     true,
		"NOTES.md":               true,
		"greet.sh":               true,
		"/compact":               false, // a slash command
		"and/or":                 false,
		"src/foo":                false,
		"e.g":                    false,
		"v1.2":                   false,
		"3.14":                   false,
		"https://example.com/x":  false,
		"a.b":                    false,
		"hello":                  false,
		"file.verylongextension": false,
		"(x)":                    false,
	} {
		require.Equal(t, want, retention.IsPath(w), w)
	}
}
