//go:build bench

package main

import (
	"bytes"
	"context"
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
