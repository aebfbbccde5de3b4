package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/benchmark"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// largeTurns × largeTurnMessages is the largest session the hostile-load
// suite fills: 30,000 tiny messages in three turns of 10,000.
const (
	largeTurns        = 3
	largeTurnMessages = 10_000
)

// BenchmarkContextOfALargeSession measures GET /v1/sessions/{id}/context of
// a 30,000-message session: the first read, which fetches and decodes
// every message, and the reads after it, which take the messages and their
// encodings from the gateway's context cache and fetch only what was stored
// since (nothing, here). It reports the first read, the p50 of the others
// and their ratio.
func BenchmarkContextOfALargeSession(b *testing.B) {
	sys := startSystem(b)
	ctx := context.Background()
	const id = "large"
	for seq := int64(1); seq <= largeTurns; seq++ {
		require.NoError(b, sys.Accountant.Apply(ctx, largeTurn(id, seq)))
	}
	first, err := sys.ContextLatency(ctx, id, 1)
	require.NoError(b, err)
	var again []time.Duration
	for b.Loop() {
		d, err := sys.ContextLatency(ctx, id, 1)
		require.NoError(b, err)
		again = append(again, d...)
	}
	p50 := benchmark.Percentile(again, 50)
	b.ReportMetric(ms(first[0]), "first-ms")
	b.ReportMetric(ms(p50), "again-p50-ms")
	b.ReportMetric(ms(first[0])/ms(p50), "first/again")
	b.Logf("context of a %d-message session: first read %.1f ms, reads after it p50 %.1f ms (%d reads), ratio %.1f",
		largeTurns*largeTurnMessages, ms(first[0]), ms(p50), len(again), ms(first[0])/ms(p50))
}

// largeTurn is one turn of largeTurnMessages one-letter messages, ending in
// a tool call.
func largeTurn(session string, seq int64) turn.Event {
	msgs := make([]turn.Message, largeTurnMessages)
	for i := range msgs {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs[i] = turn.Message{UUID: fmt.Sprintf("%s-%d-%d", session, seq, i), Role: role, Content: turn.Content{{Type: turn.BlockText, Text: "m"}}}
	}
	msgs[len(msgs)-1] = turn.Message{UUID: fmt.Sprintf("%s-%d-r", session, seq), Role: "assistant", StopReason: "tool_use", Content: turn.Content{
		{Type: turn.BlockText, Text: "next"},
		{Type: turn.BlockToolUse, ID: fmt.Sprintf("%s-t%d", session, seq), Name: "Bash", Input: json.RawMessage(`{"command":"true"}`)},
	}}
	return turn.Event{
		Schema: turn.SchemaV1, EventID: fmt.Sprintf("%s-%d", session, seq), TenantID: benchmark.Tenant, SessionID: session, Seq: seq,
		Model: "claude-sonnet-4-5", ContextWindow: 1_000_000, InputMessages: msgs[:len(msgs)-1], Response: &msgs[len(msgs)-1],
		OccurredAt: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).Add(time.Duration(seq) * time.Second),
	}
}
