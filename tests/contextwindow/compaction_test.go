package contextwindow_test

import (
	"context"
	"fmt"
	"net/http"
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

// TestAutoCompactionSwitches: a session whose switch is turned off through
// the API, or whose tenant turned compaction.auto off, grows past the
// auto-compact threshold without a compaction asked or made, and preflight
// does not say compact_first; turned on again, the next turn asks for one.
func TestAutoCompactionSwitches(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	type state struct {
		AutoCompactEnabled bool  `json:"auto_compact_enabled"`
		AutoCompact        bool  `json:"auto_compact"`
		CompactRequests    int64 `json:"compact_requests"`
	}
	patch := func(id string, on bool) state {
		t.Helper()
		var got state
		status, raw := h.call(t, http.MethodPatch, "/v1/sessions/"+id, fmt.Sprintf(`{"auto_compact_enabled": %t}`, on), &got)
		require.Equal(t, http.StatusOK, status, string(raw))
		return got
	}
	compactFirst := func(id string) bool {
		t.Helper()
		var got struct {
			CompactFirst bool `json:"compact_first"`
		}
		status, raw := h.call(t, http.MethodPost, "/v1/sessions/"+id+"/preflight", `{"input_messages": []}`, &got)
		require.Equal(t, http.StatusOK, status, string(raw))
		return got.CompactFirst
	}
	// past grows a session until its count is past the auto-compact
	// threshold, checking that nothing compacts it.
	past := func(c *conversation) {
		t.Helper()
		for round := 1; h.session(t, c.id).TokenCount < 168_000; round++ {
			require.Less(t, round, 100)
			c.user(fmt.Sprintf("Please look at module %d and tell me what it does.", round))
			c.respond(t, time.Minute, text("Reading it."), toolUse(fmt.Sprintf("%s-read-%d", c.id, round), "Read", map[string]any{"file_path": fmt.Sprintf("/src/mod%d.go", round)}))
			c.toolResult(fmt.Sprintf("%s-read-%d", c.id, round), filler(fmt.Sprintf("mod%d", round), 10_000))
			c.respond(t, time.Minute, text(fmt.Sprintf("Module %d parses configuration.", round)))
		}
		s := h.session(t, c.id)
		require.Zero(t, s.CompactRequests, "no compaction asked")
		require.Empty(t, s.CompactionID, "none made")
		require.False(t, compactFirst(c.id), "preflight: nothing compacts first")
	}

	// The session's switch.
	c := h.conversation("switched")
	c.user("Hello.")
	c.respond(t, time.Minute, text("Hi."))
	require.Equal(t, state{AutoCompactEnabled: false, AutoCompact: false}, patch(c.id, false))
	past(c)
	require.Equal(t, state{AutoCompactEnabled: true, AutoCompact: true}, patch(c.id, true))
	require.True(t, compactFirst(c.id))
	c.user("One more thing.")
	c.respond(t, time.Minute, text("Sure."))
	require.EqualValues(t, 1, h.session(t, c.id).CompactRequests, "switched on: the next turn asks")
	require.NotEmpty(t, h.settle(t, c.id).CompactionID, "and the session is compacted")

	status, raw := h.call(t, http.MethodPatch, "/v1/sessions/nope", `{"auto_compact_enabled": false}`, nil)
	require.Equal(t, http.StatusNotFound, status, string(raw))
	status, raw = h.call(t, http.MethodPatch, "/v1/sessions/"+c.id, `{}`, nil)
	require.Equal(t, http.StatusBadRequest, status, string(raw))

	// The tenant's switch (its settings, as `mnemos tenant settings` stores them).
	require.NoError(t, h.store.SetTenantSettings(context.Background(), tenant, []byte(`{"compaction": {"auto": false}}`)))
	require.Eventually(t, func() bool {
		var got state
		h.get(t, "/v1/sessions/"+c.id, &got)
		return !got.AutoCompact
	}, 10*time.Second, 50*time.Millisecond, "the settings cache took the change")
	other := h.conversation("tenant-off")
	other.user("Hello.")
	other.respond(t, time.Minute, text("Hi."))
	past(other)
	var got state
	h.get(t, "/v1/sessions/"+other.id, &got)
	require.Equal(t, state{AutoCompactEnabled: true, AutoCompact: false}, got, "the session's switch is on, its tenant's off")
}
