package contextwindow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/turn"
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

// slowSummaries is a model that takes a while to answer every summary, so
// a compaction is still running when the client asks for its context.
func slowSummaries(t *testing.T) llm.Provider {
	t.Helper()
	provider, _ := scripted(t, func(llmtest.Request) llmtest.Reply {
		time.Sleep(1500 * time.Millisecond)
		return llmtest.Text("<summary>\n## 1. Primary Request and Intent\nThe user had modules read.\n</summary>")
	})
	return provider
}

// nearTheThreshold grows a conversation until the count after its last
// response is within 12,000 tokens under auto-compact (167,000), without a
// compaction.
func nearTheThreshold(t *testing.T, h *harness, c *conversation) int64 {
	t.Helper()
	for round := 1; ; round++ {
		require.Less(t, round, 100)
		c.user(fmt.Sprintf("Please look at module %d and tell me what it does.", round))
		c.respond(t, time.Minute, text("Reading it."), toolUse(fmt.Sprintf("%s-read-%d", c.id, round), "Read", map[string]any{"file_path": fmt.Sprintf("/src/mod%d.go", round)}))
		c.toolResult(fmt.Sprintf("%s-read-%d", c.id, round), filler(fmt.Sprintf("mod%d", round), 8_000))
		c.respond(t, time.Minute, text(fmt.Sprintf("Module %d parses configuration.", round)))
		s := h.session(t, c.id)
		require.Zero(t, s.CompactRequests, "no compaction yet")
		if s.TokenCount >= 155_000 {
			require.Less(t, s.TokenCount, int64(167_000))
			return s.TokenCount
		}
	}
}

// crossing adds the next round's input: tool results (each under the
// offload threshold) that take the count from after past auto-compact.
func crossing(t *testing.T, c *conversation, after int64) []turn.Message {
	t.Helper()
	c.user("One more: read the big ones.")
	need := int(4*(167_000-after) + 16_000)
	var calls []turn.Block
	for i := 0; i*40_000 < need; i++ {
		calls = append(calls, toolUse(fmt.Sprintf("%s-big-%d", c.id, i), "Read", map[string]any{"file_path": fmt.Sprintf("/src/big%d.go", i)}))
	}
	c.respond(t, time.Minute, append([]turn.Block{text("Reading them.")}, calls...)...)
	for i := range calls {
		c.toolResult(fmt.Sprintf("%s-big-%d", c.id, i), filler(fmt.Sprintf("big%d", i), min(40_000, need-i*40_000)))
	}
	return c.pending
}

// TestTheContextIsCompactedBeforeTheCall: a session whose count after its
// last response is under the auto-compact threshold, and whose next input
// crosses it, gets a compacted context from the very next GET /context —
// the request waits for the compaction (here a model taking 1.5 s) instead
// of serving what the next call should not send.
func TestTheContextIsCompactedBeforeTheCall(t *testing.T) {
	t.Parallel()
	h := setup(t, slowSummaries(t))
	// Micro-compaction off: clearing old tool results would bring this
	// count under the threshold by itself, and the point is the compaction.
	require.NoError(t, h.store.SetTenantSettings(context.Background(), tenant, []byte(`{"micro": {"tools": []}}`)))
	c := h.conversation("before-the-call")
	after := nearTheThreshold(t, h, c)

	// The next round's input: tool results that take the count before
	// the call past the threshold.
	crossing(t, c, after)
	c.send(t)
	s := h.session(t, c.id)
	require.GreaterOrEqual(t, s.TokenCount, int64(167_000), "the count before the call crossed the threshold")
	require.True(t, s.CompactionInFlight, "the accountant asked for a compaction")

	got := h.context(t, c.id)
	require.NotNil(t, got.body.Compaction, "the very next context is compacted")
	require.Equal(t, events.MethodFull, got.body.Compaction.Method)
	require.Less(t, got.body.Tokens.Count, int64(167_000))

	// Without waiting (compaction_wait_ms=0) the context is served as it is.
	other := h.conversation("no-wait")
	after = nearTheThreshold(t, h, other)
	crossing(t, other, after)
	other.send(t)
	var now contextBody
	status, raw := h.get(t, "/v1/sessions/"+other.id+"/context?compaction_wait_ms=0", &now)
	require.Equal(t, 200, status, string(raw))
	require.Nil(t, now.Compaction, "compaction_wait_ms=0: not waited for")
	require.True(t, now.CompactionInFlight)
}

// TestPreflightCompactsBeforeTheCall: preflight with "compact": true, for
// input that takes the count past the threshold, compacts the session
// first and answers the count with that input on the compacted session.
func TestPreflightCompactsBeforeTheCall(t *testing.T) {
	t.Parallel()
	h := setup(t, slowSummaries(t))
	c := h.conversation("preflight-compact")
	after := nearTheThreshold(t, h, c)
	input := crossing(t, c, after)
	c.pending = nil
	inner, err := json.Marshal(map[string]any{"input_messages": input, "compact": true})
	require.NoError(t, err)

	var got struct {
		Count        int64 `json:"count"`
		CompactFirst bool  `json:"compact_first"`
		Compaction   *struct {
			Status  string `json:"status"`
			Trigger string `json:"trigger"`
			Method  string `json:"method"`
		} `json:"compaction"`
	}
	status, raw := h.call(t, http.MethodPost, "/v1/sessions/"+c.id+"/preflight", string(inner), &got)
	require.Equal(t, 200, status, string(raw))
	require.NotNil(t, got.Compaction, string(raw))
	require.Equal(t, "completed", got.Compaction.Status)
	require.Equal(t, events.TriggerPreflight, got.Compaction.Trigger)
	require.Equal(t, events.MethodFull, got.Compaction.Method)
	require.False(t, got.CompactFirst, "with the input on the compacted session, nothing is due")
	require.Less(t, got.Count, int64(167_000))
	require.NotEmpty(t, h.session(t, c.id).CompactionID)
}
