package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/benchmark"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
)

// TestScaleBenchEndToEnd runs the scale part of `mnemos bench` in small
// steps, so that it cannot rot: the tables hold what each step filled, each
// step measured its ingest rounds and the context reads, and the report and
// its JSON carry both steps, each round's rate, and their ratios.
func TestScaleBenchEndToEnd(t *testing.T) {
	t.Parallel()
	sys := startSystem(t)
	ctx := context.Background()
	rep, err := benchmark.Run(ctx, sys, benchmark.Options{
		Only: "scale", Rounds: 3, ScaleSessions: []int64{20, 60}, ScaleMessages: 10, ScaleSamples: 5, Sessions: 5, PerSession: 4, Progress: t.Logf,
	})
	require.NoError(t, err)
	require.Empty(t, rep.Burst, "only the scale run ran")
	require.Len(t, rep.Scale, 2)
	for i, want := range []int64{20, 60} {
		st := rep.Scale[i]
		require.Equal(t, want, st.Sessions)
		require.Greater(t, st.Messages, want*10, "the filled messages and the measured sessions'")
		require.Len(t, st.Ingest, 3, "three rounds")
		for _, in := range st.Ingest {
			require.Equal(t, 20, in.Turns)
			require.Len(t, in.Latencies, 20)
		}
		rates := st.Rates()
		slices.Sort(rates)
		require.Equal(t, rates[1], st.Rate(), "the median of three rounds")
		require.Len(t, st.Context, 5)
	}
	var filled, messages, turns int64
	require.NoError(t, pgtest.Admin(t, sys.Store).QueryRow(ctx, `
		SELECT (SELECT count(*) FROM sessions WHERE session_id LIKE 'fill-%'),
		       (SELECT count(*) FROM messages WHERE session_id LIKE 'fill-%'),
		       (SELECT count(*) FROM turns WHERE session_id LIKE 'fill-%')`).Scan(&filled, &messages, &turns))
	require.EqualValues(t, 60, filled)
	require.EqualValues(t, 600, messages)
	require.EqualValues(t, 300, turns)

	var md, js bytes.Buffer
	rep.Markdown(&md)
	t.Log("\n" + md.String())
	require.Contains(t, md.String(), "| 60 | ")
	require.Contains(t, md.String(), "Largest ÷ smallest")
	require.NoError(t, rep.JSON(&js))
	var out struct {
		Scale []struct {
			Sessions  int64     `json:"sessions"`
			TurnsPerS float64   `json:"turns_per_s"`
			Rounds    []float64 `json:"turns_per_s_rounds"`
		} `json:"scale"`
		Ratios struct {
			ContextP99 float64 `json:"context_p99"`
		} `json:"scale_ratios"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &out))
	require.Len(t, out.Scale, 2)
	require.EqualValues(t, 60, out.Scale[1].Sessions)
	require.Equal(t, rep.Scale[1].Rates(), out.Scale[1].Rounds)
	require.InDelta(t, rep.Scale[1].Rate(), out.Scale[1].TurnsPerS, 1e-9)
	require.Positive(t, out.Ratios.ContextP99)
}
