package apitest_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/api/apitest"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

var at = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

var tokens = events.Tokens{
	Count: 171_204, State: "autocompact", PercentLeft: 4.9, Window: 200_000, Effective: 180_000,
	Warning: 147_000, Error: 147_000, AutoCompact: 167_000, Blocking: 177_000,
}

// samples are events as the services write them, by the Go type's name:
// one for each type of pkg/events with a Kind method (several for a type
// whose shape varies).
func samples() map[string][]events.Event {
	dream := func(state string, change func(*events.Dream)) events.Event {
		d := events.Dream{
			Schema: events.SchemaDream, TenantID: "acme", DreamID: "0b6c3f1e-5d2a-4c1b-9f7e-2a8d4e6f1c3b", Scope: "project:repo-x",
			Trigger: "scheduled", State: state, LLMProvider: "anthropic", At: at,
		}
		if change != nil {
			change(&d)
		}
		return d
	}
	return map[string][]events.Event{
		"TurnAccounted": {
			events.TurnAccounted{
				Schema: events.SchemaTurnAccounted, EventID: "6f1c2a:7", TenantID: "acme", SessionID: "s-123", Seq: 7,
				AgentID: "main", MemoryScope: map[string]string{"user": "u-42", "project": "repo-x"}, Model: "claude-sonnet-4-5",
				Tokens: tokens, MessageUUIDs: []string{"u-7", "a-7"}, ResponseUUID: "a-7", ToolCalls: 1, ToolCallsTotal: 12,
				OffloadedTools: []string{"tr-81"}, OccurredAt: at, AccountedAt: at.Add(40 * time.Millisecond),
			},
			events.TurnAccounted{
				Schema: events.SchemaTurnAccounted, EventID: "e-1", TenantID: "acme", SessionID: "s-9", Seq: 1, AgentID: "explore-1",
				Tokens:         events.Tokens{State: "ok", PercentLeft: 100, Window: 200_000, Effective: 180_000, Warning: 147_000, Error: 147_000, AutoCompact: 167_000, Blocking: 177_000},
				ClosesUserTurn: true, OccurredAt: at, AccountedAt: at,
			},
		},
		"ContextThreshold": {
			events.ContextThreshold{Schema: events.SchemaContextThreshold, TenantID: "acme", SessionID: "s-123", EventID: "6f1c2a:7",
				Seq: 7, PreviousState: "error", Tokens: tokens, At: at},
			events.ContextThreshold{Schema: events.SchemaContextThreshold, TenantID: "acme", SessionID: "s-123",
				CompactionID: "c-4d2e", Seq: 7, PreviousState: "autocompact", Tokens: tokens, At: at},
		},
		"CompactRequested": {
			events.CompactRequested{Schema: events.SchemaCompactRequested, TenantID: "acme", SessionID: "s-123", Seq: 7, Request: 2,
				Trigger: events.TriggerAuto, Tokens: tokens, At: at},
			events.CompactRequested{Schema: events.SchemaCompactRequested, TenantID: "acme", SessionID: "s-123", Seq: 7,
				CompactionID: "c-4d2e", Trigger: events.TriggerManual, At: at},
		},
		"CompactCompleted": {
			events.CompactCompleted{Schema: events.SchemaCompactCompleted, TenantID: "acme", SessionID: "s-123", CompactionID: "c-4d2e",
				Trigger: events.TriggerManual, Method: events.MethodFull, Direction: events.DirectionUpTo, PreTokens: 171_204,
				PostTokens: 18_330, LLMCalls: 1, Tokens: tokens, At: at},
		},
		"CompactFailed": {
			events.CompactFailed{Schema: events.SchemaCompactFailed, TenantID: "acme", SessionID: "s-123", CompactionID: "c-4d2e",
				Trigger: events.TriggerAuto, Reason: "the summary was longer than the context it replaces", At: at},
		},
		"CircuitOpened": {
			events.CircuitOpened{Schema: events.SchemaCircuitOpened, TenantID: "acme", SessionID: "s-123", CompactionID: "c-4d2e",
				Failures: 3, LastError: "anthropic: 529 overloaded", At: at},
		},
		"SessionMemoryUpdated": {
			events.SessionMemoryUpdated{Schema: events.SchemaSessionMemoryUpdated, TenantID: "acme", SessionID: "s-123", Version: 4,
				LastSummarizedMessage: "a-7", TokensAtUpdate: 61_000, ToolCallsAtUpdate: 12, Sections: []string{"Current State", "Errors & Corrections"},
				LLMProvider: "anthropic", LLMModel: "claude-haiku-4-5", At: at},
		},
		"MemorySaved": {
			events.MemorySaved{Schema: events.SchemaMemorySaved, TenantID: "acme", SessionID: "s-123", Scope: "project:repo-x",
				Created: []string{"release-checklist"}, Updated: []string{"testing"}, IndexChanged: true, RunID: "r-19",
				SourceTurn: "6f1c2a:7", Seq: 7, LLMProvider: "builtin", At: at},
		},
		"Dream": {
			dream("requested", func(d *events.Dream) { d.Trigger, d.LLMProvider = "manual", "" }),
			dream("starting", nil),
			dream("updating", func(d *events.Dream) { d.Memories, d.Written = []string{"testing"}, []string{"testing"} }),
			dream("completed", func(d *events.Dream) {
				d.Memories, d.Written, d.Deleted = []string{"testing", "old-notes"}, []string{"testing"}, []string{"old-notes"}
			}),
			dream("completed", func(d *events.Dream) { d.Approved = true }),
			dream("failed", func(d *events.Dream) { d.Reason = "the model did not answer" }),
			dream("killed", func(d *events.Dream) { d.Reason = "killed before it started" }),
			dream("proposed", func(d *events.Dream) {
				d.Memories, d.Deleted, d.Destructive, d.Allowed = []string{"a", "b", "c"}, []string{"a", "b", "c"}, 3, 1
				d.Reason = "deletes or rewrites 3 of 4 live memories; 1 allowed without approval"
			}),
		},
	}
}

// source parses a file of the repository.
func source(t *testing.T, path string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../../"+path, nil, 0)
	require.NoError(t, err)
	return f
}

// stringConsts lists the string constants of f whose names start with prefix.
func stringConsts(t *testing.T, f *ast.File, prefix string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, prefix) || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					out[name.Name] = v
				}
			}
		}
	}
	return out
}

// TestEveryEventHasASchema reads pkg/events and pkg/bus as source, so a
// new event without a schema (or a sample here) fails: every schema name
// has its file, every kind of subject its schema, and every type with a
// Kind method a sample.
func TestEveryEventHasASchema(t *testing.T) {
	t.Parallel()
	files := api.EventSchemas()
	names := stringConsts(t, source(t, "pkg/events/events.go"), "Schema")
	require.NotEmpty(t, names)
	for constant, name := range names {
		require.Contains(t, files, api.EventSchemaFile(name), "events.%s (%s) has no schema in api/events", constant, name)
	}
	kinds := stringConsts(t, source(t, "pkg/bus/subject.go"), "Kind")
	require.NotEmpty(t, kinds)
	for constant, kind := range kinds {
		require.NotEmpty(t, apitest.SchemaOf(kind), "bus.%s (%s) names no schema in apitest", constant, kind)
	}
	var typed []string
	for _, decl := range source(t, "pkg/events/contract.go").Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || fn.Name.Name != "Kind" {
			continue
		}
		if id, ok := fn.Recv.List[0].Type.(*ast.Ident); ok {
			typed = append(typed, id.Name)
		}
	}
	require.NotEmpty(t, typed)
	slices.Sort(typed)
	require.Equal(t, typed, slices.Sorted(maps.Keys(samples())), "each event type of pkg/events has samples here")
}

// TestEventsMatchTheirSchemas: each sample, encoded as the services encode
// it, matches its schema; taking away a required field, adding one the
// schema does not name, or naming another schema does not.
func TestEventsMatchTheirSchemas(t *testing.T) {
	t.Parallel()
	for typ, list := range samples() {
		for _, ev := range list {
			data, err := json.Marshal(ev)
			require.NoError(t, err)
			require.NoError(t, apitest.CheckEvent(ev.Kind(), data), "%s %s", typ, data)
			var fields map[string]any
			require.NoError(t, json.Unmarshal(data, &fields))
			for _, key := range required(t, apitest.SchemaOf(ev.Kind())) {
				without := maps.Clone(fields)
				delete(without, key)
				require.Error(t, apitest.CheckEvent(ev.Kind(), encode(t, without)), "%s without %s", typ, key)
			}
			extra := maps.Clone(fields)
			extra["surprise"] = 1
			require.Error(t, apitest.CheckEvent(ev.Kind(), encode(t, extra)), "%s with a field the schema does not name", typ)
			other := maps.Clone(fields)
			other["schema"] = "mnemos.something_else.v1"
			require.Error(t, apitest.CheckEvent(ev.Kind(), encode(t, other)), "%s naming another schema", typ)
		}
	}
	d := samples()["Dream"][1].(events.Dream)
	require.Error(t, apitest.CheckEvent("dream.completed", encode(t, d)), "a dream's state is its subject's")
	require.Error(t, apitest.CheckEvent("dream.completed", []byte(`{"schema":`)))
	require.Error(t, apitest.CheckEvent("turn.unheard_of", []byte(`{}`)))
}

// TestTheTurnEventMatchesItsSchema: the turn event is checked against
// pkg/turn's schema, the one the gateway and the accountant apply.
func TestTheTurnEventMatchesItsSchema(t *testing.T) {
	t.Parallel()
	ev := turn.Event{
		Schema: turn.SchemaV1, EventID: "6f1c2a:7", TenantID: "acme", SessionID: "s-123", Seq: 7, AgentID: "main",
		MemoryScope: map[string]string{"user": "u-42"}, Model: "claude-sonnet-4-5", ContextWindow: 200_000, MaxOutputTokens: 32_000,
		InputMessages: []turn.Message{{UUID: "u-7", Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: "run the tests"}}}},
		Response: &turn.Message{UUID: "a-7", Role: "assistant", StopReason: "tool_use", Content: turn.Content{
			{Type: turn.BlockToolUse, ID: "toolu_2", Name: "Bash", Input: json.RawMessage(`{"command":"make test"}`)},
		}},
		Usage:      &turn.Usage{InputTokens: 1, CacheCreationInputTokens: 955, CacheReadInputTokens: 165_803, OutputTokens: 301},
		OccurredAt: at,
	}
	data, err := turn.Marshal(ev)
	require.NoError(t, err)
	require.NoError(t, apitest.CheckEvent("turn.completed", data))
	ev.Seq = 0
	data, err = turn.Marshal(ev)
	require.NoError(t, err)
	require.Error(t, apitest.CheckEvent("turn.completed", data))
}

// required lists the required fields of a schema of api/events.
func required(t *testing.T, schema string) []string {
	t.Helper()
	var s struct {
		Required []string `json:"required"`
	}
	require.NoError(t, json.Unmarshal(api.EventSchemas()[api.EventSchemaFile(schema)], &s))
	require.NotEmpty(t, s.Required, schema)
	return s.Required
}

func encode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
