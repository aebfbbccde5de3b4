//go:build bench

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
)

func TestBenchCommandPrintsItsTables(t *testing.T) {
	t.Parallel()
	var out, errs bytes.Buffer
	dbURL := pgtest.URL(t)
	err := run(context.Background(), []string{"bench", "--database-url", pgtest.OwnerURL(t, dbURL), "--services-database-url", dbURL,
		"--rounds", "1", "--sessions", "5", "--turns-per-session", "4", "--sustain", "1s", "--samples", "3", "--sizes", "5000",
		"--proxy-sizes", "3000", "--proxy-samples", "3"},
		env(nil), &out, &errs)
	require.NoError(t, err, errs.String())
	for _, want := range []string{"Machine: ", " (GOGC=", "turns/s end to end", "at a sustained rate", "ratio to Postgres", "| 5K tokens |", "| 3K (", "| long: "} {
		require.Contains(t, out.String(), want)
	}
	require.Regexp(t, `\| 3K \([^)]+\) \| messages \|`, out.String())
	require.Regexp(t, `\| 3K \([^)]+\) \| responses \|`, out.String())
	require.Error(t, run(context.Background(), []string{"bench", "--sizes", "big"}, env(nil), io.Discard, io.Discard))
	require.Error(t, run(context.Background(), []string{"bench", "--only", "everything"}, env(nil), io.Discard, io.Discard))
	for _, doors := range []string{"chat", "messages,messages", "messages,", ""} {
		require.ErrorContains(t, run(context.Background(), []string{"bench", "--proxy-doors", doors}, env(nil), io.Discard, io.Discard), "--proxy-doors", doors)
	}
	require.ErrorContains(t, run(context.Background(), []string{"bench", "--scale", "--scale-sessions", "5000,100"}, env(nil), io.Discard, io.Discard), "increasing order")
	require.ErrorContains(t, run(context.Background(), []string{"bench", "--scale", "--only", "proxy"}, env(nil), io.Discard, io.Discard), "scale part alone")
}

// TestBenchCostThroughMnemos: in one `mnemos bench --json` run of the
// proxy part, priced input through Mnemos is at most straight's on the
// short session and at most 0.9 of it on both long ones, every request
// through Mnemos under the auto-compact threshold.
func TestBenchCostThroughMnemos(t *testing.T) {
	t.Parallel()
	var out, errs bytes.Buffer
	dbURL := pgtest.URL(t)
	err := run(context.Background(), []string{"bench", "--database-url", pgtest.OwnerURL(t, dbURL), "--services-database-url", dbURL,
		"--only", "proxy", "--proxy-sizes", "3000", "--proxy-samples", "3", "--proxy-doors", "messages", "--json"},
		env(nil), &out, &errs)
	require.NoError(t, err, errs.String())
	var rep struct {
		Cost []struct {
			Session   string  `json:"session"`
			Ratio     float64 `json:"priced_input_ratio"`
			Largest   int64   `json:"largest_request_through"`
			Threshold int64   `json:"autocompact_threshold"`
		} `json:"proxy_cost"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep), out.String())
	most := map[string]float64{"short": 1.0, "long": 0.9, "large-reads": 0.9}
	require.Len(t, rep.Cost, len(most))
	for _, c := range rep.Cost {
		t.Logf("%s: priced input through Mnemos %.3f of straight, largest request %d (threshold %d)", c.Session, c.Ratio, c.Largest, c.Threshold)
		require.Contains(t, most, c.Session)
		require.LessOrEqual(t, c.Ratio, most[c.Session], c.Session)
		require.Positive(t, c.Threshold)
		require.Less(t, c.Largest, c.Threshold, c.Session)
	}
}
