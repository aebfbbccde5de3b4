package contextwindow_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/stretchr/testify/require"
)

// grow adds rounds of file reads (about 5,000 tokens each) until the
// session's first compaction has run, waiting for each compaction it asks
// for. It returns the number of rounds.
func grow(t *testing.T, h *harness, c *conversation, until func(rounds int) bool) int {
	t.Helper()
	for round := 1; ; round++ {
		c.user(fmt.Sprintf("Please look at module %d and tell me what it does.", round))
		c.respond(t, time.Minute, text("Reading it."), toolUse(fmt.Sprintf("%s-read-%d", c.id, round), "Read", map[string]any{"file_path": fmt.Sprintf("/src/mod%d.go", round)}))
		c.toolResult(fmt.Sprintf("%s-read-%d", c.id, round), filler(fmt.Sprintf("mod%d", round), 20_000))
		c.respond(t, time.Minute, text(fmt.Sprintf("Module %d parses configuration.", round)))
		s := h.session(t, c.id)
		require.Less(t, s.TokenCount, int64(177_000), "round %d: the session reached the blocking limit", round)
		if s.CompactionInFlight {
			h.settle(t, c.id)
		}
		if until(round) {
			return round
		}
		require.Less(t, round, 200, "never finished")
	}
}

func TestAutoCompactionBringsTheContextUnderTheThreshold(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	c := h.conversation("long")
	grow(t, h, c, func(int) bool { return h.session(t, c.id).CompactionID != "" })

	var got contextBody
	status, raw := h.get(t, "/v1/sessions/long/context", &got)
	require.Equal(t, 200, status, string(raw))
	require.NotNil(t, got.Compaction)
	require.Equal(t, events.MethodFull, got.Compaction.Method)
	require.Equal(t, "builtin", got.LLMProvider)
	require.Less(t, got.Tokens.Count, got.Tokens.AutoCompact, "the count after compaction")
	require.Less(t, got.ContextTokens, got.Tokens.AutoCompact, "the rendered context")
	first := got.Messages[0]
	require.Equal(t, "user", first.Role)
	require.True(t, strings.HasPrefix(first.Content[0].Text, "<mnemos:compact-boundary"), first.Content[0].Text)
	require.Contains(t, first.Content[1].Text, "Primary Request and Intent")
	require.Contains(t, first.Content[1].Text, "Please look at module 1 and tell me")
	require.Empty(t, got.MessageUUIDs[0], "the head is no stored message")

	// A new turn appends to the compacted context.
	c.user("And module 99?")
	c.respond(t, time.Minute, text("Module 99 is new."))
	var after contextBody
	status, _ = h.get(t, "/v1/sessions/long/context", &after)
	require.Equal(t, 200, status)
	require.Equal(t, got.Messages[0], after.Messages[0])
	require.Len(t, after.Messages, len(got.Messages)+2)
}
