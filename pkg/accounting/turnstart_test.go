package accounting_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func TestStart(t *testing.T) {
	t.Parallel()

	cfg, off := tokens.DefaultConfig(), accounting.DefaultOffload()
	system := json.RawMessage(`"You are a careful agent. Read before you write."`)
	tools := json.RawMessage(`[{"name":"Read","description":"Reads a file from the local filesystem.","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}}}}]`)
	prefix, ok, err := tokens.EstimatePrefix(turn.RequestPrefix{System: system, Tools: tools})
	require.NoError(t, err)
	require.True(t, ok)
	require.Positive(t, prefix)
	msg := textMessage("u1", 4_000)
	msgTokens := tokens.EstimateMessage(msg)

	t.Run("the first request counts the prefix, not 4/3 of the messages", func(t *testing.T) {
		t.Parallel()
		req := accounting.Request{Prefix: &turn.RequestPrefix{System: system, Tools: tools, Hash: "h1"}}
		p, err := accounting.PreflightWith(cfg, off, session(), req, 0, []turn.Message{msg})
		require.NoError(t, err)
		require.Equal(t, prefix+msgTokens, p.Count)
	})

	t.Run("a known hash costs nothing, an unknown one is not taken", func(t *testing.T) {
		t.Parallel()
		s := session()
		s.PrefixTokens, s.PrefixHash = 7_000, "h1"
		n, hash, ok, err := accounting.PrefixOf(s, &turn.RequestPrefix{Hash: "h1"})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, s.PrefixTokens, n)
		require.Equal(t, "h1", hash)
		_, _, ok, err = accounting.PrefixOf(s, &turn.RequestPrefix{Hash: "h2"})
		require.NoError(t, err)
		require.False(t, ok)
		_, _, _, err = accounting.PrefixOf(s, &turn.RequestPrefix{System: json.RawMessage(`{"not":"a system"}`)})
		require.Error(t, err)
	})

	t.Run("a changed prefix moves the baseline by the difference", func(t *testing.T) {
		t.Parallel()
		s := session()
		s.HasUsage, s.BaselineTokens, s.PrefixTokens, s.PrefixHash = true, 50_000, prefix+500, "old"
		req := accounting.Request{Prefix: &turn.RequestPrefix{System: system, Tools: tools, Hash: "new"}}
		p, err := accounting.PreflightWith(cfg, off, s, req, 0, nil)
		require.NoError(t, err)
		require.Equal(t, s.BaselineTokens-500, p.Count)
	})

	t.Run("a client compaction starts over from the prefix", func(t *testing.T) {
		t.Parallel()
		s := session()
		s.HasUsage, s.BaselineTokens, s.PendingTokens, s.PrefixTokens, s.EstimateFactor = true, 150_000, 3_000, 9_000, 1.25
		s.StaleUsageAbove = 90_000
		tally := accounting.TallyOf(s)
		require.NoError(t, accounting.Start(&tally, &s, accounting.Request{ClientCompaction: true}, 0))
		tally.Add(msgTokens)
		require.Equal(t, s.PrefixTokens+int64(float64(msgTokens)*s.EstimateFactor), tally.Count(),
			"the summary and what follows, calibrated, beside the prefix: not on top of the history")
		require.Zero(t, s.StaleUsageAbove)
	})

	t.Run("a model change counts the context by its estimate", func(t *testing.T) {
		t.Parallel()
		s := session()
		s.HasUsage, s.BaselineTokens, s.PrefixTokens, s.EstimateFactor = true, 120_000, 9_000, 1.3
		req := accounting.Request{Model: "claude-opus-4-5"}
		require.True(t, req.ModelChanged(s))
		require.False(t, accounting.Request{Model: s.Model}.ModelChanged(s))
		const context = 80_000
		p, err := accounting.PreflightWith(cfg, off, s, req, context, []turn.Message{msg})
		require.NoError(t, err)
		require.Equal(t, s.PrefixTokens+context+msgTokens, p.Count, "no factor: it was learnt on the other model")
	})
}
