package sessionnotes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// chat builds view messages one API round at a time.
type chat struct {
	msgs  []view.Message
	round int64
}

func (c *chat) add(role string, blocks ...turn.Block) {
	m := view.Message{UUID: fmt.Sprintf("m%d", len(c.msgs)), Position: int64(len(c.msgs)), Round: c.round, Role: role, Content: blocks}
	m.Tokens = tokens.EstimateContent(m.Content)
	c.msgs = append(c.msgs, m)
}

func (c *chat) user(text string) {
	c.round++
	c.add("user", turn.Block{Type: turn.BlockText, Text: text})
}

func (c *chat) call(id, name string, input map[string]any, result string, isErr bool) {
	raw, _ := json.Marshal(input)
	c.add("assistant", turn.Block{Type: turn.BlockToolUse, ID: id, Name: name, Input: raw})
	c.round++
	inner := turn.Content{{Type: turn.BlockText, Text: result}}
	c.add("user", turn.Block{Type: turn.BlockToolResult, ToolUseID: id, IsError: isErr, Content: &inner})
}

func (c *chat) answer(text string) { c.add("assistant", turn.Block{Type: turn.BlockText, Text: text}) }

// update runs one builtin update of doc over msgs through the builtin
// provider, as the service does, and applies the answer.
func update(t *testing.T, doc sessionnotes.Document, msgs []view.Message) (sessionnotes.Document, string) {
	t.Helper()
	p := builtin.New(map[llm.Task]builtin.Handler{llm.TaskNotes: sessionnotes.Builtin})
	req := sessionnotes.Request(sessionnotes.UpdateInput{Tenant: "acme", SessionID: "s1", Notes: doc, Messages: msgs, SectionTokens: 2000, TotalTokens: 12000})
	require.Equal(t, llm.TaskNotes, req.Task)
	resp, err := p.Complete(context.Background(), req)
	require.NoError(t, err)
	edits, err := sessionnotes.ParseEdits(resp.Text, doc)
	require.NoError(t, err, resp.Text)
	return sessionnotes.Apply(doc, edits), resp.Text
}

func body(d sessionnotes.Document, h string) string {
	s, _ := d.Section(h)
	return s.Body
}

func TestBuiltinFillsTheNotesFromTheConversation(t *testing.T) {
	t.Parallel()
	var c chat
	c.user("# Fix the failing parser test in pkg/parse")
	c.call("t1", "Read", map[string]any{"file_path": "/src/parse.go"}, "package parse ...", false)
	c.call("t2", "Bash", map[string]any{"command": "go test ./pkg/parse"}, "FAIL: TestParse (unexpected EOF)", true)
	c.call("t3", "Edit", map[string]any{"file_path": "/src/parse.go", "old_string": "a", "new_string": "b"}, "ok", false)
	c.answer("The parser now handles a missing newline at the end.")

	doc, answer := update(t, template(t), c.msgs)
	require.NoError(t, doc.CheckStructure())
	require.Equal(t, `\# Fix the failing parser test in pkg/parse`, body(doc, sessionnotes.HeadingTitle), "a title is never read as a heading")
	require.Contains(t, body(doc, sessionnotes.HeadingState), "> # Fix the failing parser test")
	require.Contains(t, body(doc, sessionnotes.HeadingState), "> The parser now handles a missing newline at the end.")
	require.Contains(t, body(doc, sessionnotes.HeadingTask), "- # Fix the failing parser test in pkg/parse")
	require.Equal(t, "- /src/parse.go (read, edited)", body(doc, sessionnotes.HeadingFiles))
	require.Equal(t, "- `go test ./pkg/parse`", body(doc, sessionnotes.HeadingWorkflow))
	require.Contains(t, body(doc, sessionnotes.HeadingErrors), "Bash: FAIL: TestParse (unexpected EOF)")
	require.Equal(t, "- Update 1: 8 messages, 3 tool calls (Bash: 1, Edit: 1, Read: 1), 1 failed; files: /src/parse.go; latest request: # Fix the failing parser test in pkg/parse",
		body(doc, sessionnotes.HeadingWorklog))
	require.Empty(t, body(doc, sessionnotes.HeadingLearnings), "what the data does not say stays empty")
	require.NotContains(t, answer, "# "+sessionnotes.HeadingLearnings, "only changed sections are answered")

	_, again := update(t, template(t), c.msgs)
	require.Equal(t, answer, again, "the builtin answer depends only on the request")

	// The next update merges: earlier files and commands stay, new ones follow.
	var next chat
	next.round = 10
	next.user("Now also run the linter.")
	next.call("t4", "Bash", map[string]any{"command": "make lint"}, "ok", false)
	next.call("t5", "Read", map[string]any{"file_path": "/src/lex.go"}, "package lex", false)
	next.call("t6", "Edit", map[string]any{"file_path": "/src/parse.go"}, "ok", false)
	next.answer("Lint is clean.")
	doc2, _ := update(t, doc, next.msgs)
	require.Equal(t, body(doc, sessionnotes.HeadingTitle), body(doc2, sessionnotes.HeadingTitle), "the title is written once")
	require.Equal(t, "- /src/parse.go (read, edited)\n- /src/lex.go (read)", body(doc2, sessionnotes.HeadingFiles))
	require.Equal(t, "- `go test ./pkg/parse`\n- `make lint`", body(doc2, sessionnotes.HeadingWorkflow))
	require.Contains(t, body(doc2, sessionnotes.HeadingState), "> Now also run the linter.")
	require.Len(t, strings.Split(body(doc2, sessionnotes.HeadingWorklog), "\n"), 2)
}

func TestBuiltinKeepsLongListsBounded(t *testing.T) {
	t.Parallel()
	doc := template(t)
	for batch := range 30 {
		var c chat
		c.round = int64(batch * 100)
		c.user(fmt.Sprintf("Batch %d: read the next files.", batch))
		for i := range 10 {
			id := fmt.Sprintf("b%d-%d", batch, i)
			c.call(id, "Read", map[string]any{"file_path": fmt.Sprintf("/src/pkg%d/very/long/path/to/the/file_number_%d.go", batch, i)}, "x", false)
			c.call(id+"x", "Bash", map[string]any{"command": fmt.Sprintf("go test ./pkg%d/... -run TestNumber%d -count=1 -v", batch, i)}, "ok", false)
		}
		c.answer("Done.")
		doc, _ = update(t, doc, c.msgs)
	}
	for _, s := range doc.Sections {
		require.LessOrEqual(t, int64(len(s.Body)+3)/4, int64(2_000), "section %s", s.Heading)
	}
	files := body(doc, sessionnotes.HeadingFiles)
	require.True(t, strings.HasPrefix(files, "- /src/pkg0/very/long/path/to/the/file_number_0.go (read)\n[… "), "the first file stays, then what was left out:\n%s", files[:200])
	require.True(t, strings.HasSuffix(files, "/src/pkg29/very/long/path/to/the/file_number_9.go (read)"), "the latest file is there")
	// Every file is accounted for: listed, or counted as left out.
	lines := strings.Split(files, "\n")
	var left int
	_, err := fmt.Sscanf(lines[1], "[… %d earlier files left out]", &left)
	require.NoError(t, err, lines[1])
	require.Equal(t, 300, len(lines)-1+left)
}

func TestRequestCarriesNotesAndSubstitutedPrompt(t *testing.T) {
	t.Parallel()
	var c chat
	c.user("Hello")
	c.answer("Hi")
	doc := filled(t, map[string]string{sessionnotes.HeadingWorklog: strings.Repeat("long worklog line. ", 600)})
	req := sessionnotes.Request(sessionnotes.UpdateInput{
		Tenant: "acme", SessionID: "s-42", Notes: doc, Messages: c.msgs,
		Prompt: "Session {{session_id}}: at most {{max_section_tokens}} per section.{{oversized_sections}} {{unknown}}", SectionTokens: 2000, TotalTokens: 12000,
	})
	last := req.Messages[len(req.Messages)-1]
	require.Equal(t, "user", last.Role)
	n := len(last.Content)
	require.Equal(t, "<current-notes>\n"+doc.Render()+"\n</current-notes>", last.Content[n-2].Text)
	prompt := last.Content[n-1].Text
	require.True(t, strings.HasPrefix(prompt, "Session s-42: at most 2000 per section. These sections are over their limit and must be shortened now: \"Worklog\""), prompt)
	require.True(t, strings.HasSuffix(prompt, " {{unknown}}"))
	require.NotEmpty(t, req.System)
	require.EqualValues(t, sessionnotes.DefaultMaxOutputTokens, req.MaxTokens)
}

func TestRecentKeepsTheLatestRounds(t *testing.T) {
	t.Parallel()
	var c chat
	for i := range 10 {
		c.user(strings.Repeat(fmt.Sprintf("round %d ", i), 100)) // about 200 tokens a round
	}
	all := view.Tokens(c.msgs)
	require.Equal(t, c.msgs, sessionnotes.Recent(c.msgs, all))
	got := sessionnotes.Recent(c.msgs, all/2)
	require.LessOrEqual(t, view.Tokens(got), all/2)
	require.Equal(t, c.msgs[len(c.msgs)-1], got[len(got)-1])
	require.Len(t, sessionnotes.Recent(c.msgs, 1), 1, "the latest round always stays")
}

// TestBuiltinWritesAWorklogEntryEveryUpdate: two updates over windows that
// read alike (the same number of messages and tool calls, the same answer)
// each add their entry. The second used to repeat the first entry word for
// word, which a list drops, so nothing changed and the empty answer was
// rejected: an agent looping on one command saw its notes stop.
func TestBuiltinWritesAWorklogEntryEveryUpdate(t *testing.T) {
	t.Parallel()
	doc := template(t)
	for n := range 3 {
		var c chat
		c.round = int64(n * 10)
		for i := range 3 {
			c.call(fmt.Sprintf("w%d-%d", n, i), "Bash", map[string]any{"command": "make test"}, fmt.Sprintf("round %d.%d: ok", n, i), false)
			c.answer("Running the next step.")
		}
		doc, _ = update(t, doc, c.msgs)
	}
	// Seven messages each: the request merges an answer with the call after it.
	require.Equal(t, "- Update 1: 7 messages, 3 tool calls (Bash: 3)\n- Update 2: 7 messages, 3 tool calls (Bash: 3)\n- Update 3: 7 messages, 3 tool calls (Bash: 3)",
		body(doc, sessionnotes.HeadingWorklog))
}
