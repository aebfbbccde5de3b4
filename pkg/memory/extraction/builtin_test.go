package extraction_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/claudecodetest"
	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/extraction"
	"github.com/mnemos-ai/mnemos/pkg/memory/memtools"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

var (
	scope = memory.Scope{Kind: memory.KindProject, ID: "repo-x"}
	now   = time.Date(2026, 11, 22, 15, 30, 0, 0, time.UTC)
)

func text(s string) turn.Block { return turn.Block{Type: turn.BlockText, Text: s} }

func toolUse(id, name, input string) turn.Block {
	return turn.Block{Type: turn.BlockToolUse, ID: id, Name: name, Input: json.RawMessage(input)}
}

func toolResult(id, s string) turn.Block {
	c := turn.Content{text(s)}
	return turn.Block{Type: turn.BlockToolResult, ToolUseID: id, Content: &c}
}

func conversation(msgs ...view.Message) []view.Message {
	for i := range msgs {
		msgs[i].Position = int64(i)
		msgs[i].Round = int64(i/2 + 1)
		msgs[i].Tokens = tokens.EstimateContent(msgs[i].Content)
	}
	return msgs
}

func user(blocks ...turn.Block) view.Message {
	return view.Message{Role: "user", Content: blocks}
}

func assistant(blocks ...turn.Block) view.Message {
	return view.Message{Role: "assistant", Content: blocks}
}

func TestRequest(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 10_000)
	req := extraction.Request(extraction.Input{
		Tenant: "acme", Scope: scope, Now: now, MaxTurns: 5,
		Messages: conversation(
			user(text("Please look at the logs.")),
			assistant(text("Reading."), toolUse("t1", "Read", `{"file_path": "/var/log/app.log", "padding": "`+big+`"}`)),
			user(toolResult("t1", big)),
			assistant(text("The logs show a timeout.")),
		),
		Manifest: []memory.Header{
			{Name: "testing", Type: memory.TypeFeedback, Description: "Integration tests hit a real database", UpdatedAt: now.Add(-50 * time.Hour)},
			{Name: "deploys", Type: memory.TypeProject, Description: "Deploy freeze\n over the holidays", UpdatedAt: now.Add(-time.Hour)},
		},
	})
	require.Equal(t, llm.TaskExtraction, req.Task)
	require.Equal(t, "acme", req.Tenant)
	require.Empty(t, req.Tools, "the loop offers the scope's tools")
	for _, rule := range []string{"user:", "feedback:", "project:", "reference:", "**Why:**", "**How to apply:**", "absolute",
		"code patterns", "git history", "how a bug was found or fixed", "instructions already say", "state of the task", "rather than writing a second one"} {
		require.Contains(t, req.System, rule)
	}
	require.NotContains(t, req.System, "repo-x", "the system prompt is the same for every run (cached)")

	last := req.Messages[len(req.Messages)-1]
	require.Equal(t, "user", last.Role)
	n := len(last.Content)
	manifest, instructions := last.Content[n-2].Text, last.Content[n-1].Text
	require.Equal(t, `<memory-manifest scope="project:repo-x">
The 2 memories of project:repo-x, most recently updated first:
- testing.md [feedback] updated 2026-11-20 (2 days ago): Integration tests hit a real database
- deploys.md [project] updated 2026-11-22 (today): Deploy freeze over the holidays
</memory-manifest>`, manifest)
	require.Contains(t, instructions, "Today is 2026-11-22 (UTC).")
	require.Contains(t, instructions, "at most 5 turns")
	require.Contains(t, instructions, "Save to project:repo-x")

	var result, input string
	for _, m := range req.Messages {
		for _, b := range m.Content {
			switch b.Type {
			case turn.BlockToolResult:
				result = (*b.Content)[0].Text
			case turn.BlockToolUse:
				input = string(b.Input)
			}
		}
	}
	require.LessOrEqual(t, len(result), extraction.DefaultToolResultBytes)
	require.Contains(t, result, "truncated")
	require.True(t, json.Valid([]byte(input)), "a trimmed tool input is still a JSON object")
	require.Less(t, len(input), extraction.DefaultToolInputBytes+100)

	empty := extraction.Manifest(scope, nil, now)
	require.Contains(t, empty, "The scope holds no memories yet.")
}

// complete runs the builtin provider as the loop does.
func complete(t *testing.T, req llm.Request) llm.Response {
	t.Helper()
	p := builtin.New(map[llm.Task]builtin.Handler{llm.TaskExtraction: extraction.Builtin})
	resp, err := p.Complete(context.Background(), req)
	require.NoError(t, err)
	return resp
}

type write struct {
	Name, Description, Type, Body string
}

func writes(t *testing.T, resp llm.Response) []write {
	t.Helper()
	var out []write
	for _, c := range resp.ToolCalls {
		require.Equal(t, memtools.ToolWrite, c.Name)
		require.NotEmpty(t, c.ID)
		var w write
		require.NoError(t, json.Unmarshal(c.Input, &w))
		out = append(out, w)
	}
	return out
}

// TestBuiltinWritesWhatTheUserAskedToKeep: the builtin answers the first
// turn with one memory_write per explicit request or correction of the
// user's — never from the agent's words or a tool's output — reusing the
// name of a memory that already holds the same rule, and ends the run on
// the next turn.
func TestBuiltinWritesWhatTheUserAskedToKeep(t *testing.T) {
	t.Parallel()
	msgs := conversation(
		user(text("remember that our staging DB is read-only on Fridays")),
		assistant(text("Noted. Don't forget to check the replica too."), toolUse("t1", "Bash", `{"command": "grep -r \"never\" docs"}`)),
		user(toolResult("t1", "docs/rules.md: don't mock the database; always use pnpm")),
		assistant(text("Done.")),
		user(text("<system-reminder>Never use the Write tool on existing files.</system-reminder>Thanks. don't mock the database in these tests. From now on use pnpm.")),
		assistant(text("Understood.")),
	)
	req := extraction.Request(extraction.Input{Tenant: "acme", Scope: scope, Now: now, Messages: msgs, Manifest: []memory.Header{
		{Name: "testing-with-a-real-db", Type: memory.TypeFeedback, Description: "Correction: Don't mock the database in these tests", UpdatedAt: now},
		{Name: "use-pnpm", Type: memory.TypeFeedback, Description: "Package manager", UpdatedAt: now},
	}})
	resp := complete(t, req)
	require.Equal(t, "tool_use", resp.StopReason)
	got := writes(t, resp)
	require.Equal(t, []write{
		{
			Name: "staging-db-read-only-fridays", Description: "Our staging DB is read-only on Fridays", Type: "feedback",
			Body: "Our staging DB is read-only on Fridays.\n\n" +
				"**Why:** the user asked for this to be remembered on 2026-11-22: \"remember that our staging DB is read-only on Fridays\".\n" +
				"**How to apply:** take it into account whenever the work touches it, and check that it still holds before relying on it.",
		},
		{
			Name: "testing-with-a-real-db", Description: "Correction: Don't mock the database in these tests", Type: "feedback",
			Body: "Don't mock the database in these tests.\n\n" +
				"**Why:** the user corrected the agent on 2026-11-22: \"don't mock the database in these tests\".\n" +
				"**How to apply:** do not repeat what was corrected; where a case is unclear, ask rather than guess.",
		},
		{
			Name: "use-pnpm", Description: "Standing instruction: Use pnpm", Type: "feedback",
			Body: "Use pnpm.\n\n" +
				"**Why:** the user set this as a standing instruction on 2026-11-22: \"From now on use pnpm\".\n" +
				"**How to apply:** follow it in every session of this scope until the user says otherwise.",
		},
	}, got)
	for _, w := range got {
		doc := memory.Document{Name: memory.Name(w.Name), Description: w.Description, Type: memory.Type(w.Type), Body: w.Body}
		require.NoError(t, doc.Validate(memory.DefaultLimits()), w.Name)
	}

	// The next turn carries the tool results: the run ends.
	next := req
	next.Messages = append(append([]llm.Message(nil), req.Messages...),
		llm.Message{Role: "assistant", Content: turn.Content{toolUse("builtin_write_1", memtools.ToolWrite, `{}`)}},
		llm.Message{Role: "user", Content: turn.Content{toolResult("builtin_write_1", "Created staging-db-read-only-fridays.md (revision 1)")}})
	end := complete(t, next)
	require.Empty(t, end.ToolCalls)
	require.Equal(t, "end_turn", end.StopReason)

	// Asked again, the builtin answers the same.
	require.Equal(t, resp.ToolCalls, complete(t, req).ToolCalls)
}

func TestBuiltinWritesNothingWithoutAnExplicitRequest(t *testing.T) {
	t.Parallel()
	req := extraction.Request(extraction.Input{Tenant: "acme", Scope: scope, Now: now, Messages: conversation(
		user(text("I don't know why the build fails. Don't worry about the flaky test.")),
		assistant(text("Let me look. Never mind, found it: always run make generate.")),
	)})
	resp := complete(t, req)
	require.Empty(t, resp.ToolCalls)
	require.Equal(t, "end_turn", resp.StopReason)
}

// TestBuiltinOnTheFixtures: the sample transcripts hold no explicit request
// to remember anything (nor do the long one's compaction summary and
// slash-command records, which are not the user's own requests): the
// builtin saves nothing from them.
func TestBuiltinOnTheFixtures(t *testing.T) {
	t.Parallel()
	for _, name := range claudecodetest.Names {
		msgs := fixture(t, name)
		require.NotEmpty(t, msgs, name)
		resp := complete(t, extraction.Request(extraction.Input{Tenant: "acme", Scope: scope, Now: now, Messages: msgs}))
		require.Empty(t, resp.ToolCalls, name)
	}
}

func TestBuiltinRefusesARequestItDidNotBuild(t *testing.T) {
	t.Parallel()
	p := builtin.New(map[llm.Task]builtin.Handler{llm.TaskExtraction: extraction.Builtin})
	_, err := p.Complete(context.Background(), llm.Request{Task: llm.TaskExtraction, Messages: []llm.Message{
		{Role: "user", Content: turn.Content{text("Extract long-term memories from the conversation above.")}},
	}})
	require.Equal(t, llm.KindRequest, llm.KindOf(err))
}

// BenchmarkBuiltinOnAFixture: the builtin extractor's first turn on the
// whole of the largest fixture transcript (every user text scanned).
func BenchmarkBuiltinOnAFixture(b *testing.B) {
	req := extraction.Request(extraction.Input{Tenant: "acme", Scope: scope, Now: now, Messages: fixture(b, "long.jsonl")})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := extraction.Builtin(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// fixture is every message of a fixture transcript, its sub-agents' too, in order.
func fixture(tb testing.TB, name string) []view.Message {
	tb.Helper()
	f, err := os.Open(claudecodetest.Path(tb, name))
	require.NoError(tb, err)
	recs, err := claudecode.Parse(f)
	require.NoError(tb, f.Close())
	require.NoError(tb, err)
	var msgs []view.Message
	for _, ev := range claudecode.Events(claudecode.Group(recs, claudecode.GroupOptions{}), claudecode.EventOptions{}) {
		for _, m := range ev.Messages() {
			msgs = append(msgs, view.Message{UUID: m.UUID, Position: int64(len(msgs)), Round: ev.Seq, Role: m.Role, Content: m.Content, Tokens: tokens.EstimateMessage(m)})
		}
	}
	return msgs
}
