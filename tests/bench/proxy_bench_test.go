package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/benchmark"
)

// TestProxyBenchEndToEnd runs the proxy part of `mnemos bench` on small
// sessions, so that it cannot rot: at each door and size every sample went
// through Mnemos and straight, the upstream got the same requests both
// ways, the short
// session went the same both ways, and the long one grew past the
// auto-compact threshold straight and stayed under it through Mnemos, as
// the large reads did.
func TestProxyBenchEndToEnd(t *testing.T) {
	t.Parallel()
	sys := startSystem(t)
	rep, err := benchmark.Run(context.Background(), sys, benchmark.Options{
		Only: "proxy", ProxySizes: []int64{2_000, 8_000}, ProxySamples: 12, Progress: t.Logf,
	})
	require.NoError(t, err)
	require.Empty(t, rep.Burst, "only the proxy ran")
	require.Empty(t, rep.Context)

	require.Len(t, rep.Proxy, 4, "each size at each door")
	for i, p := range rep.Proxy {
		require.Equal(t, []int64{2_000, 8_000}[i/2], p.Tokens)
		require.Equal(t, benchmark.Doors[i%2], p.Door, "the doors in turn at each size")
		require.Len(t, p.Through, 12)
		require.Len(t, p.Straight, 12)
		require.Zero(t, p.Differed, "the proxy passed every request on as the client sent it")
		require.GreaterOrEqual(t, p.Sent[0], p.Tokens, "the sessions are as large as asked")
		require.Less(t, p.Sent[1], p.Tokens+p.Tokens/4)
	}

	require.Len(t, rep.ProxyCost, 3)
	short, long, large := rep.ProxyCost[0], rep.ProxyCost[1], rep.ProxyCost[2]
	require.Less(t, large.LargestThrough, large.Threshold, "the large reads stay under the threshold through Mnemos")
	require.Equal(t, short.CallsStraight, short.CallsThrough)
	require.Equal(t, short.Straight, short.Through, "a short session reaches the upstream the same through Mnemos")
	require.Less(t, short.LargestStraight, short.Threshold)
	require.Equal(t, long.CallsStraight, long.CallsThrough, "one call a file, then the answer, both ways")
	require.Greater(t, long.LargestStraight, long.Threshold, "straight, the session grows past the auto-compact threshold")
	require.Less(t, long.LargestThrough, long.Threshold, "through Mnemos, no request reaches it")

	var md, js bytes.Buffer
	rep.Markdown(&md)
	t.Log("\n" + md.String())
	require.Contains(t, md.String(), "| 8K (")
	require.Contains(t, md.String(), "| responses |")
	require.NoError(t, rep.JSON(&js))
	var out struct {
		Proxy []struct {
			Door   string  `json:"door"`
			Tokens int64   `json:"tokens"`
			P50MS  float64 `json:"p50_ms"`
		} `json:"proxy"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &out))
	require.Len(t, out.Proxy, 4)
	require.EqualValues(t, 8_000, out.Proxy[3].Tokens)
	require.Equal(t, benchmark.DoorResponses, out.Proxy[3].Door)
	require.Positive(t, out.Proxy[3].P50MS)
}
