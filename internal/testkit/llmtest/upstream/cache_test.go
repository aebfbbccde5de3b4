package upstream_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
)

// conversation is a call of n user messages of one text block each, the
// first one long, with cache_control on the messages named by marks.
func conversation(n int, marks ...int) *upstream.Request {
	req := &upstream.Request{Model: "claude-sonnet-4-5", System: json.RawMessage(`"Be brief."`)}
	for i := range n {
		text := fmt.Sprintf("message %d", i)
		if i == 0 {
			text = strings.Repeat("a long opening that fills the cache. ", 40)
		}
		block := map[string]any{"type": "text", "text": text}
		for _, m := range marks {
			if m == i {
				block["cache_control"] = map[string]any{"type": "ephemeral"}
			}
		}
		content, _ := json.Marshal([]any{block})
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		req.Messages = append(req.Messages, upstream.Message{Role: role, Content: content})
	}
	return req
}

func TestCacheReadsWithinTheLookback(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		grown    int // messages of the second call
		wantRead bool
	}{
		{"breakpoint moved by 20 blocks", 1 + upstream.Lookback, true},
		{"breakpoint moved by 21 blocks", 2 + upstream.Lookback, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var c upstream.Cache
			first := upstream.Measure(conversation(1, 0))
			u1 := c.Use(first)
			require.Zero(t, u1.CacheReadInputTokens)
			require.Equal(t, first.Tokens[1], u1.CacheCreationInputTokens, "the system prompt and the first message")

			second := upstream.Measure(conversation(tc.grown, tc.grown-1))
			u2 := c.Use(second)
			if tc.wantRead {
				require.Equal(t, first.Tokens[1], u2.CacheReadInputTokens)
				require.Equal(t, second.Total()-first.Tokens[1], u2.CacheCreationInputTokens)
			} else {
				require.Zero(t, u2.CacheReadInputTokens, "the written prefix is out of the breakpoint's reach")
				require.Equal(t, second.Total(), u2.CacheCreationInputTokens)
			}
			require.Equal(t, second.Total(), u2.CacheReadInputTokens+u2.CacheCreationInputTokens, "the breakpoint ends the prompt")
		})
	}
}

func TestCacheControlDoesNotChangeThePrefix(t *testing.T) {
	t.Parallel()
	marked, plain := upstream.Measure(conversation(3, 2)), upstream.Measure(conversation(3))
	require.Equal(t, plain.Hashes, marked.Hashes)
	require.Equal(t, plain.Tokens, marked.Tokens)
	require.Equal(t, []int{3}, marked.Breaks, "the system block, then one block per message")
	require.Empty(t, plain.Breaks)

	auto := conversation(3)
	auto.CacheControl = json.RawMessage(`{"type":"ephemeral"}`)
	require.Equal(t, []int{3}, upstream.Measure(auto).Breaks, "top-level cache_control marks the last block")
}

func TestCacheMinimumAndModel(t *testing.T) {
	t.Parallel()
	c := upstream.Cache{MinTokens: 100000}
	p := upstream.Measure(conversation(2, 1))
	require.Zero(t, c.Use(p).CacheCreationInputTokens, "too short to cache")
	require.Zero(t, c.Use(p).CacheReadInputTokens)

	var d upstream.Cache
	d.Use(p)
	other := conversation(2, 1)
	other.Model = "claude-opus-4-1"
	require.Zero(t, d.Use(upstream.Measure(other)).CacheReadInputTokens, "each model has its own cache")
	require.Equal(t, p.Tokens[2], d.Use(p).CacheReadInputTokens)
}

func TestPricedInput(t *testing.T) {
	t.Parallel()
	u := upstream.Usage{InputTokens: 100, CacheCreationInputTokens: 1000, CacheReadInputTokens: 10000, OutputTokens: 7}
	require.InDelta(t, 100+1250+1000, upstream.PricedInput(u), 1e-9)
	require.InDelta(t, 10000.0/11100, upstream.ReadShare(u), 1e-9)
	require.Equal(t, upstream.Usage{InputTokens: 200, CacheCreationInputTokens: 2000, CacheReadInputTokens: 20000, OutputTokens: 14},
		upstream.Sum([]upstream.Call{{Usage: u}, {Usage: u}}))
	require.Zero(t, upstream.ReadShare(upstream.Usage{}))
}
