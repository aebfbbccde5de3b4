package assembly_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/claudecodetest"
	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// fixtureMessages returns the main session's messages of a sample transcript,
// as the store would hold them.
func fixtureMessages(t *testing.T, name string) []view.Message {
	t.Helper()
	f, err := os.Open(claudecodetest.Path(t, name))
	require.NoError(t, err)
	defer f.Close()
	recs, err := claudecode.Parse(f)
	require.NoError(t, err)
	events := claudecode.Events(claudecode.Group(recs, claudecode.GroupOptions{}), claudecode.EventOptions{})
	require.NotEmpty(t, events)

	var msgs []view.Message
	for _, ev := range events {
		if ev.Agent() != turn.MainAgent || ev.SessionID != events[0].SessionID {
			continue
		}
		for _, m := range ev.Messages() {
			msgs = append(msgs, view.Message{UUID: m.UUID, Position: int64(len(msgs)), Round: ev.Seq,
				Role: m.Role, Content: m.Content, Tokens: tokens.EstimateMessage(m)})
		}
	}
	return msgs
}

func TestRenderFixture(t *testing.T) {
	t.Parallel()

	// The sub-agent session calls a compactable tool (Bash) and one that is
	// not (Agent): only the Bash result is compactable.
	sub := fixtureMessages(t, "subagent.jsonl")
	var subCalls []string
	for _, m := range sub {
		for _, b := range m.Content {
			if b.Type == turn.BlockToolUse {
				subCalls = append(subCalls, b.Name)
			}
		}
	}
	require.Equal(t, []string{"Bash", "Agent"}, subCalls)
	subResults := assembly.Compactable(sub, assembly.DefaultToolSet(), nil)
	require.Len(t, subResults, 1)
	require.Equal(t, turn.BlockToolResult, sub[subResults[0].Message].Content[subResults[0].Block].Type)

	// tool_heavy.jsonl: 11 tool results, of Read and Bash (README).
	msgs := fixtureMessages(t, "tool_heavy.jsonl")
	names := map[string]string{}
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == turn.BlockToolUse {
				names[b.ID] = b.Name
			}
		}
	}
	results := assembly.Compactable(msgs, assembly.DefaultToolSet(), nil)
	require.Len(t, results, 11)
	for _, r := range results {
		b := msgs[r.Message].Content[r.Block]
		require.Equal(t, turn.BlockToolResult, b.Type)
		require.Equal(t, r.ToolUseID, b.ToolUseID)
		require.Equal(t, tokens.EstimateBlock(b), r.Tokens)
		require.Contains(t, []string{"Read", "Bash"}, names[r.ToolUseID])
	}

	last := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	ids := assembly.ByTime(results, last, last.Add(2*time.Hour), time.Hour, 5)
	require.Len(t, ids, 11-5)
	cleared := make(map[string]bool, len(ids))
	for _, id := range ids {
		cleared[id] = true
	}

	before := assembly.Render(assembly.Input{Messages: msgs})
	after := assembly.Render(assembly.Input{Messages: msgs, Cleared: cleared})
	require.Less(t, after.Tokens, before.Tokens)
	require.False(t, assembly.IsPrefix(before.Prefix(), after.Prefix()))

	data, err := after.Encode()
	require.NoError(t, err)
	var decoded struct {
		Messages []map[string]json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(data, &decoded))
	require.Len(t, decoded.Messages, len(msgs))
	for _, m := range decoded.Messages {
		require.Len(t, m, 2, "a wire message holds role and content only")
	}

	// Exactly the chosen results are cleared, everything else renders as stored.
	seen := 0
	for i, m := range after.Messages {
		require.Equal(t, msgs[i].UUID, after.UUIDs[i])
		for j, b := range m.Content {
			stored := msgs[i].Content[j]
			if b.Type == turn.BlockToolResult && cleared[b.ToolUseID] {
				seen++
				require.Equal(t, turn.Content{{Type: turn.BlockText, Text: assembly.ClearedText}}, *b.Content)
				require.Equal(t, stored.IsError, b.IsError)
				continue
			}
			want, err := turn.Marshal(stored)
			require.NoError(t, err)
			got, err := turn.Marshal(b)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		}
	}
	require.Equal(t, len(ids), seen)

	// Appending the next round after the decision keeps the prefix.
	next := append(msgs[:len(msgs):len(msgs)], view.Message{UUID: "next", Position: int64(len(msgs)), Role: "user",
		Content: turn.Content{{Type: turn.BlockText, Text: "thanks"}}})
	appended := assembly.Render(assembly.Input{Messages: next, Cleared: cleared})
	require.True(t, assembly.IsPrefix(after.Prefix(), appended.Prefix()))
}
