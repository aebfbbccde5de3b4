package memtools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/anthropic"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/memtools"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

var (
	scope = memory.Scope{Kind: memory.KindUser, ID: "u-42"}
	other = memory.Scope{Kind: memory.KindProject, ID: "secret-project"}
)

type fixture struct {
	mem     *memory.Store
	metrics *telemetrytest.Reader
}

func setup(t *testing.T) *fixture {
	t.Helper()
	_, f := setupDB(t)
	return f
}

func setupDB(t *testing.T) (*store.Store, *fixture) {
	t.Helper()
	db := pgtest.New(t)
	ctx := context.Background()
	require.NoError(t, db.EnsureTenant(ctx, "acme", "Acme"))
	metrics := telemetrytest.New(t)
	mem, err := memory.NewStore(db, metrics.Meter(), memory.Options{})
	require.NoError(t, err)
	return db, &fixture{mem: mem, metrics: metrics}
}

func (f *fixture) seed(t *testing.T, sc memory.Scope, name, description, body string) {
	t.Helper()
	_, err := f.mem.Write(context.Background(), "acme", sc, memory.Document{Name: memory.Name(name), Description: description, Type: memory.TypeFeedback, Body: body},
		memory.Change{Actor: memory.ActorAPI}, memory.Expect{})
	require.NoError(t, err)
}

func binding(actor memory.Actor) memtools.Binding {
	return memtools.Binding{Tenant: "acme", Scope: scope, Actor: actor, Reason: "after turn 7", SourceTurns: []string{"ev-7"}}
}

// provider is the real Anthropic SDK provider against a local server that
// answers as script says.
func provider(t *testing.T, script llmtest.Script) (llm.Provider, *llmtest.Server) {
	t.Helper()
	srv := llmtest.NewAnthropicServer(t, script)
	p, err := anthropic.New(anthropic.Config{APIKey: "test-key", BaseURL: srv.URL})
	require.NoError(t, err)
	return p, srv
}

func call(name string, input any) llm.ToolCall {
	raw, _ := json.Marshal(input)
	return llm.ToolCall{Name: name, Input: raw}
}

func request(text string) llm.Request {
	return llm.Request{Tenant: "acme", Task: llm.TaskExtraction, System: "You keep the user's memories.",
		Messages: []llm.Message{{Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: text}}}}}
}

// TestLoopListsReadsThenWrites: the model lists the scope's memories, reads
// one, then writes a new one and edits the one it read, and ends its turn.
// Each round's tool results reach the model through the real SDK.
func TestLoopListsReadsThenWrites(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed(t, scope, "testing", "Tests hit a real database", "Use pgtest.")
	var seen []llmtest.Request
	p, srv := provider(t, func(req llmtest.Request) llmtest.Reply {
		seen = append(seen, req)
		last := req.Messages[len(req.Messages)-1].Text
		switch len(req.Messages) {
		case 1:
			return llmtest.Reply{Text: "Let me see what is saved.", ToolCalls: []llm.ToolCall{call(memtools.ToolList, map[string]any{})}}
		case 3:
			if !strings.Contains(last, "- testing.md [feedback]") {
				return llmtest.Text("the list did not arrive: " + last)
			}
			return llmtest.Reply{ToolCalls: []llm.ToolCall{call(memtools.ToolRead, map[string]any{"name": "testing.md"})}}
		case 5:
			if !strings.Contains(last, "description: Tests hit a real database") {
				return llmtest.Text("the memory did not arrive: " + last)
			}
			return llmtest.Reply{ToolCalls: []llm.ToolCall{
				call(memtools.ToolWrite, map[string]any{"name": "deploy-freeze", "type": "project",
					"description": "Deploys are frozen over the holidays", "body": "No deploys from 2026-12-20 to 2027-01-05.\n\n**Why:** on-call is thin.\n**How to apply:** plan releases before."}),
				call(memtools.ToolEdit, map[string]any{"name": "testing", "old_string": "Use pgtest.", "new_string": "Use pgtest; never mock the store."}),
			}}
		case 7:
			if !strings.Contains(last, "Created deploy-freeze.md (revision 1)") || !strings.Contains(last, "Updated testing.md (revision 2)") {
				return llmtest.Text("the writes did not arrive: " + last)
			}
			return llmtest.Text("Saved one new memory and sharpened another.")
		}
		return llmtest.Text("unexpected call")
	})
	ex, err := memtools.New(f.mem, binding(memory.ActorExtractor), memtools.Options{})
	require.NoError(t, err)
	res, err := memtools.Loop(context.Background(), p, request("The user said: we freeze deploys over the holidays."), ex, 0)
	require.NoError(t, err)
	require.Equal(t, "Saved one new memory and sharpened another.", res.Text)
	require.Equal(t, 4, res.Turns)
	require.Equal(t, 4, srv.Calls())
	require.False(t, res.Capped)
	require.Equal(t, "end_turn", res.StopReason)
	require.Equal(t, 4, res.ToolCalls)
	require.Zero(t, res.ToolErrors)
	require.Equal(t, []memory.Name{"deploy-freeze", "testing"}, res.Written)
	require.Empty(t, res.Deleted)
	require.Len(t, res.Messages, 8)
	require.Positive(t, res.Usage.InputTokens)

	require.Equal(t, memtools.AllTools, seen[0].Tools, "the executor's tools are offered")
	require.Equal(t, "You keep the user's memories.", seen[0].System)

	ctx := context.Background()
	m, err := f.mem.Get(ctx, "acme", scope, "testing")
	require.NoError(t, err)
	require.Equal(t, "Use pgtest; never mock the store.", m.Body)
	revs, err := f.mem.Revisions(ctx, "acme", scope, "deploy-freeze")
	require.NoError(t, err)
	require.Equal(t, memory.Change{Actor: memory.ActorExtractor, Reason: "after turn 7", SourceTurns: []string{"ev-7"}}, revs[0].Change)
	ix, err := f.mem.Index(ctx, "acme", scope)
	require.NoError(t, err)
	require.Contains(t, ix.Content, "- [deploy-freeze](deploy-freeze.md) — Deploys are frozen over the holidays\n")
	require.EqualValues(t, 2, f.metrics.Sum("mnemos.memories.changed", "actor", "extractor"))
}

// TestLoopStopsAfterMaxTurns: a model that never stops calling tools is
// cut off after the allowed number of turns.
func TestLoopStopsAfterMaxTurns(t *testing.T) {
	t.Parallel()
	f := setup(t)
	always := func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{ToolCalls: []llm.ToolCall{call(memtools.ToolIndexRead, map[string]any{})}}
	}
	for _, c := range []struct{ max, want int }{{3, 3}, {0, memtools.DefaultMaxTurns}, {1, 1}} {
		p, srv := provider(t, always)
		ex, err := memtools.New(f.mem, binding(memory.ActorDreamer), memtools.Options{})
		require.NoError(t, err)
		res, err := memtools.Loop(context.Background(), p, request("consolidate"), ex, c.max)
		require.NoError(t, err)
		require.Equal(t, c.want, res.Turns, "max %d", c.max)
		require.Equal(t, c.want, srv.Calls())
		require.True(t, res.Capped)
		require.Equal(t, c.want, res.ToolCalls, "the last turn's calls ran too")
	}
}

// TestLoopEndsOnAModelFailure: a failed call ends the loop with its error
// and keeps what was written before it.
func TestLoopEndsOnAModelFailure(t *testing.T) {
	t.Parallel()
	f := setup(t)
	p, _ := provider(t, llmtest.Sequence(
		llmtest.Reply{ToolCalls: []llm.ToolCall{call(memtools.ToolWrite, map[string]any{"name": "a", "description": "d", "type": "user", "body": "b"})}},
		llmtest.Unauthorized(),
	))
	ex, err := memtools.New(f.mem, binding(memory.ActorExtractor), memtools.Options{})
	require.NoError(t, err)
	res, err := memtools.Loop(context.Background(), p, request("go"), ex, 5)
	require.Equal(t, llm.KindAuth, llm.KindOf(err))
	require.Equal(t, 1, res.Turns)
	require.Equal(t, []memory.Name{"a"}, res.Written)
}

func run(t *testing.T, ex *memtools.Executor, name string, input any) memtools.Result {
	t.Helper()
	var raw json.RawMessage
	switch v := input.(type) {
	case string:
		raw = json.RawMessage(v)
	default:
		raw, _ = json.Marshal(v)
	}
	res, err := ex.Run(context.Background(), llm.ToolCall{ID: "toolu_x", Name: name, Input: raw})
	require.NoError(t, err, "%s %s", name, raw)
	require.NotEmpty(t, res.Text)
	return res
}

func TestExecutorStaysInItsScope(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed(t, other, "secret", "another scope's memory", "Not for user:u-42.")
	f.seed(t, scope, "mine", "this scope's memory", "Mine.")
	ex, err := memtools.New(f.mem, binding(memory.ActorExtractor), memtools.Options{})
	require.NoError(t, err)

	for _, name := range []string{"../project:secret-project/secret", "project:secret-project/secret", "/secret", "..", "sub/secret", `..\secret`} {
		for tool, input := range map[string]any{
			memtools.ToolRead:   map[string]any{"name": name},
			memtools.ToolWrite:  map[string]any{"name": name, "description": "d", "type": "user", "body": "overwrite"},
			memtools.ToolEdit:   map[string]any{"name": name, "old_string": "Not", "new_string": "Now"},
			memtools.ToolDelete: map[string]any{"name": name},
		} {
			res := run(t, ex, tool, input)
			require.True(t, res.IsError, "%s %q", tool, name)
			require.Contains(t, res.Text, "out_of_scope", "%s %q", tool, name)
		}
	}
	res := run(t, ex, memtools.ToolRead, map[string]any{"name": "secret"})
	require.True(t, res.IsError, "a name of another scope is simply not in this one")
	require.Contains(t, res.Text, "Not found")
	res = run(t, ex, memtools.ToolIndexWrite, map[string]any{"content": "- [s](secret.md) — x\n"})
	require.True(t, res.IsError)
	require.Contains(t, res.Text, "bad_index")

	got, err := f.mem.Get(context.Background(), "acme", other, "secret")
	require.NoError(t, err)
	require.Equal(t, "Not for user:u-42.", got.Body, "the other scope is untouched")
	require.EqualValues(t, 1, got.Revision)
	require.Empty(t, ex.Written())
	require.EqualValues(t, 24, f.metrics.Sum("mnemos.memories.refused", "reason", "out_of_scope"))
}

func TestExecutorRefusesBadCalls(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed(t, scope, "twice", "repeats itself", "same same")
	ex, err := memtools.New(f.mem, binding(memory.ActorExtractor), memtools.Options{Tools: []string{memtools.ToolList, memtools.ToolRead, memtools.ToolWrite, memtools.ToolEdit}})
	require.NoError(t, err)
	tools, err := ex.Tools(context.Background())
	require.NoError(t, err)
	require.Len(t, tools, 4)
	for _, tool := range tools {
		var schema map[string]any
		require.NoError(t, json.Unmarshal(tool.InputSchema, &schema), tool.Name)
		require.Equal(t, "object", schema["type"])
		require.Contains(t, tool.Description, "user:u-42")
	}

	cases := []struct {
		tool  string
		input any
		want  string
	}{
		{memtools.ToolDelete, map[string]any{"name": "twice"}, "no tool \"memory_delete\" here"},
		{"shell", map[string]any{}, "bad_request"},
		{memtools.ToolRead, `not json`, "not a JSON object"},
		{memtools.ToolRead, `[1, 2]`, "not a JSON object"},
		{memtools.ToolRead, `null`, "needs \"name\""},
		{memtools.ToolRead, map[string]any{"name": 5}, "bad_request"},
		{memtools.ToolRead, map[string]any{}, "needs \"name\""},
		{memtools.ToolRead, map[string]any{"name": ""}, "bad_name"},
		{memtools.ToolRead, map[string]any{"name": "missing"}, "Not found"},
		{memtools.ToolWrite, map[string]any{"name": "n", "description": "d", "type": "opinion", "body": "b"}, "bad_type"},
		{memtools.ToolWrite, map[string]any{"name": "n", "description": "", "type": "user", "body": "b"}, "bad_description"},
		{memtools.ToolWrite, map[string]any{"name": "n", "description": "d", "type": "user"}, "needs \"body\""},
		{memtools.ToolWrite, map[string]any{"name": "n", "description": "d", "type": "user", "body": strings.Repeat("x", 20_000)}, "too_large"},
		{memtools.ToolWrite, map[string]any{"name": "N", "description": "d", "type": "user", "body": "b"}, "bad_name"},
		{memtools.ToolEdit, map[string]any{"name": "twice", "old_string": "same", "new_string": "other"}, "occurs 2 times"},
		{memtools.ToolEdit, map[string]any{"name": "twice", "old_string": "absent", "new_string": "other"}, "does not occur"},
		{memtools.ToolEdit, map[string]any{"name": "twice", "old_string": "", "new_string": "other"}, "old_string is empty"},
		{memtools.ToolEdit, map[string]any{"name": "twice", "old_string": "same", "new_string": "same"}, "are the same"},
		{memtools.ToolEdit, map[string]any{"name": "twice", "old_string": "type: feedback", "new_string": "type: gossip"}, "bad_type"},
		{memtools.ToolEdit, map[string]any{"name": "twice", "old_string": "name: twice", "new_string": "name: thrice"}, "cannot rename"},
		{memtools.ToolEdit, map[string]any{"name": "twice", "old_string": "---\nname", "new_string": "name"}, "bad_frontmatter"},
	}
	for _, c := range cases {
		res := run(t, ex, c.tool, c.input)
		require.True(t, res.IsError, "%s %v: %s", c.tool, c.input, res.Text)
		require.Contains(t, res.Text, c.want, "%s %v", c.tool, c.input)
	}
	res := run(t, ex, memtools.ToolEdit, map[string]any{"name": "twice", "old_string": "same", "new_string": "once", "replace_all": true})
	require.False(t, res.IsError, res.Text)
	m, err := f.mem.Get(context.Background(), "acme", scope, "twice")
	require.NoError(t, err)
	require.Equal(t, "once once", m.Body)
	require.Equal(t, []memory.Name{"twice"}, ex.Written())
	require.EqualValues(t, 4, f.metrics.Sum("mnemos.memories.refused", "reason", "bad_edit"))
	require.EqualValues(t, 8, f.metrics.Sum("mnemos.memories.refused", "reason", "bad_request"))
}

func TestDeletesBeyondTheLimitAreProposed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, n := range []string{"a", "b", "c"} {
		f.seed(t, scope, n, "about "+n, "x")
	}
	ex, err := memtools.New(f.mem, binding(memory.ActorDreamer), memtools.Options{MaxDeletes: 1})
	require.NoError(t, err)
	res := run(t, ex, memtools.ToolDelete, map[string]any{"name": "a", "reason": "merged into b"})
	require.False(t, res.IsError, res.Text)
	require.Contains(t, res.Text, "Deleted a.md")
	res = run(t, ex, memtools.ToolDelete, map[string]any{"name": "c", "reason": "stale"})
	require.False(t, res.IsError)
	require.Contains(t, res.Text, "proposed for approval")
	res = run(t, ex, memtools.ToolDelete, map[string]any{"name": "zzz"})
	require.True(t, res.IsError, "a proposal names a memory that exists")

	require.Equal(t, []memory.Name{"a"}, ex.Deleted())
	require.Equal(t, []memtools.Proposal{{Name: "c", Revision: 1, Reason: "stale"}}, ex.Proposals())
	ctx := context.Background()
	_, err = f.mem.Get(ctx, "acme", scope, "c")
	require.NoError(t, err, "a proposed deletion is not performed")
	revs, err := f.mem.Revisions(ctx, "acme", scope, "a")
	require.NoError(t, err)
	require.Equal(t, "after turn 7: merged into b", revs[1].Change.Reason)

	res = run(t, ex, memtools.ToolIndexWrite, map[string]any{"content": "- [C](c.md) — stale, proposed\n"})
	require.False(t, res.IsError, res.Text)
	require.Contains(t, res.Text, "appended: b.md")
	require.True(t, ex.IndexChanged())
	res = run(t, ex, memtools.ToolIndexRead, map[string]any{})
	require.Equal(t, "- [C](c.md) — stale, proposed\n- [b](b.md) — about b\n", res.Text)
	res = run(t, ex, memtools.ToolList, map[string]any{})
	require.Contains(t, res.Text, "2 memories of user:u-42")

	none, err := memtools.New(f.mem, binding(memory.ActorDreamer), memtools.Options{})
	require.NoError(t, err)
	res = run(t, none, memtools.ToolDelete, map[string]any{"name": "b"})
	require.Contains(t, res.Text, "proposed for approval", "by default nothing is deleted")
	free, err := memtools.New(f.mem, binding(memory.ActorDreamer), memtools.Options{MaxDeletes: memtools.NoDeleteLimit})
	require.NoError(t, err)
	res = run(t, free, memtools.ToolDelete, map[string]any{"name": "b"})
	require.Contains(t, res.Text, "Deleted b.md")
}

func TestNewRefusesABadBinding(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, b := range []memtools.Binding{
		{Tenant: "acme", Actor: memory.ActorExtractor},
		{Tenant: "acme", Scope: scope, Actor: "robot"},
		{Tenant: "acme", Scope: scope, Actor: memory.ActorAgent},
	} {
		_, err := memtools.New(f.mem, b, memtools.Options{})
		require.Error(t, err, "%+v", b)
	}
	_, err := memtools.New(f.mem, binding(memory.ActorAPI), memtools.Options{Tools: []string{"memory_shell"}})
	require.Error(t, err)
}
