package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/bus/bustest"
	"github.com/mnemos-ai/mnemos/pkg/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

// contextSizes are the session sizes context assembly is measured at.
var contextSizes = []int64{10_000, 50_000, 150_000}

// samples is how many requests each round times per size and path.
const samples = 40

// BenchmarkContextAssembly measures GET /v1/sessions/{id}/context (over
// HTTP, from the gateway's handler through Postgres) for sessions of 10K,
// 50K and 150K tokens, and in the same run a plain SELECT of the same
// messages, and reports the p50 and p99 of each and their ratio.
func BenchmarkContextAssembly(b *testing.B) {
	st := pgtest.New(b)
	bb := bustest.New(b)
	log := bustest.Logger(b)
	ctx := context.Background()
	require.NoError(b, st.EnsureTenant(ctx, "bench", "bench"))
	require.NoError(b, st.AddAPIKey(ctx, "bench", "bench", "bench-key"))
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, time.Minute)
	require.NoError(b, err)
	acc, err := tokenaccounting.New(tokenaccounting.DefaultConfig(), st, bb, settings, log, nil)
	require.NoError(b, err)
	gw, err := gateway.New(gateway.DefaultConfig(), st, bb, settings, log, nil)
	require.NoError(b, err)
	mux := http.NewServeMux()
	gw.Register(mux)
	api := httptest.NewServer(mux)
	b.Cleanup(api.Close)

	for _, size := range contextSizes {
		buildSession(b, acc, fmt.Sprintf("ctx-%d", size), size)
	}
	type result struct{ assemble, sel []float64 }
	results := map[int64]*result{}
	for _, size := range contextSizes {
		results[size] = &result{}
	}
	for b.Loop() {
		for _, size := range contextSizes {
			id := fmt.Sprintf("ctx-%d", size)
			r := results[size]
			for range samples {
				r.assemble = append(r.assemble, timeIt(func() { getContext(b, api.URL, id) }))
				r.sel = append(r.sel, timeIt(func() { selectMessages(b, st, id) }))
			}
		}
	}
	for _, size := range contextSizes {
		r := results[size]
		k := size / 1000
		a50, a99 := percentile(r.assemble, 50), percentile(r.assemble, 99)
		s50, s99 := percentile(r.sel, 50), percentile(r.sel, 99)
		b.ReportMetric(a50, fmt.Sprintf("ctx%dk-p50-ms", k))
		b.ReportMetric(a99, fmt.Sprintf("ctx%dk-p99-ms", k))
		b.ReportMetric(s50, fmt.Sprintf("select%dk-p50-ms", k))
		b.ReportMetric(a50/s50, fmt.Sprintf("ratio%dk-p50", k))
		b.Logf("context assembly, %dK-token session: p50 %.2f ms, p99 %.2f ms; plain SELECT of its messages: p50 %.2f ms, p99 %.2f ms; ratio of p50s %.1f (%d samples each)",
			k, a50, a99, s50, s99, a50/s50, len(r.assemble))
	}
}

// buildSession applies rounds to a session until it holds about size tokens:
// a user request, a tool call and its 3,200-byte result, and a short answer.
func buildSession(b *testing.B, acc *tokenaccounting.Service, id string, size int64) {
	b.Helper()
	ctx := context.Background()
	var seq, count int64
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	for round := 0; count < size; round++ {
		call := fmt.Sprintf("%s-call-%d", id, round)
		result := turn.Content{{Type: turn.BlockText, Text: strings.Repeat(fmt.Sprintf("result %d of the search. ", round), 200)[:3_200]}}
		input, _ := json.Marshal(map[string]string{"description": "look around", "prompt": "find the config loader"})
		msgs := []turn.Message{
			{UUID: fmt.Sprintf("%s-u-%d", id, round), Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: strings.Repeat("Please keep going with the refactor. ", 11)}}},
		}
		resp := turn.Message{UUID: fmt.Sprintf("%s-a-%d", id, round), Role: "assistant", StopReason: "tool_use",
			Content: turn.Content{{Type: turn.BlockText, Text: "Searching."}, {Type: turn.BlockToolUse, ID: call, Name: "Task", Input: input}}}
		for _, ev := range []struct {
			in   []turn.Message
			resp turn.Message
		}{
			{msgs, resp},
			{[]turn.Message{{UUID: fmt.Sprintf("%s-r-%d", id, round), Role: "user", Content: turn.Content{{Type: turn.BlockToolResult, ToolUseID: call, Content: &result}}}},
				turn.Message{UUID: fmt.Sprintf("%s-b-%d", id, round), Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: turn.BlockText, Text: "Found it; the loader reads the file once."}}}},
		} {
			seq++
			at = at.Add(time.Minute)
			var added int64
			for _, m := range ev.in {
				added += tokens.EstimateMessage(m)
			}
			count += added + tokens.EstimateMessage(ev.resp)
			resp := ev.resp
			require.NoError(b, acc.Apply(ctx, turn.Event{
				Schema: turn.SchemaV1, EventID: fmt.Sprintf("%s-e-%d", id, seq), TenantID: "bench", SessionID: id, Seq: seq,
				Model: "claude-sonnet-4-5", InputMessages: ev.in, Response: &resp, OccurredAt: at,
				Usage: &turn.Usage{InputTokens: count - tokens.EstimateMessage(ev.resp), OutputTokens: tokens.EstimateMessage(ev.resp)},
			}))
		}
	}
}

func getContext(b *testing.B, base, id string) {
	req, err := http.NewRequest(http.MethodGet, base+"/v1/sessions/"+id+"/context", nil)
	require.NoError(b, err)
	req.Header.Set("Authorization", "Bearer bench-key")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b, err)
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.NoError(b, err)
	require.Equal(b, http.StatusOK, resp.StatusCode)
}

// selectMessages is the baseline: one transaction reading the session's
// messages, nothing rendered.
func selectMessages(b *testing.B, st *store.Store, id string) {
	err := st.InTx(context.Background(), "bench", func(tx *store.Tx) error {
		_, err := tx.Messages(context.Background(), id)
		return err
	})
	require.NoError(b, err)
}

func timeIt(f func()) float64 {
	start := time.Now()
	f()
	return float64(time.Since(start).Microseconds()) / 1000
}

// percentile is the p-th percentile of xs (nearest rank).
func percentile(xs []float64, p float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
