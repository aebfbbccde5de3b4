package tokenaccounting_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// TestTurnsArrivingTogetherShareATransaction: a burst of turns over the bus
// goes through the group commit (the handler is wired to it): batches of
// several turns are committed, and every turn ends applied once.
func TestTurnsArrivingTogetherShareATransaction(t *testing.T) {
	t.Parallel()
	h := setup(t)
	want := map[string]int64{}
	var burst []bus.Outgoing
	const sessions, rounds = 40, 5
	for seq := int64(1); seq <= rounds; seq++ {
		for i := range sessions {
			id := fmt.Sprintf("burst%d", i)
			ev := turn.Event{
				Schema: turn.SchemaV1, EventID: fmt.Sprintf("%s-%d", id, seq), TenantID: tenant, SessionID: id, Seq: seq,
				Model:         "claude-sonnet-4-5",
				InputMessages: []turn.Message{{UUID: fmt.Sprintf("%s-u%d", id, seq), Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: "go on"}}}},
				Response:      &turn.Message{UUID: fmt.Sprintf("%s-a%d", id, seq), Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: turn.BlockText, Text: "done"}}},
				Usage:         &turn.Usage{InputTokens: 100 * seq, OutputTokens: 5},
				OccurredAt:    time.Date(2026, 11, 28, 9, 0, int(seq), 0, time.UTC),
			}
			data, err := json.Marshal(ev)
			require.NoError(t, err)
			burst = append(burst, bus.Outgoing{Subject: h.bus.Subject(bus.KindTurnCompleted, tenant, id), MsgID: ev.EventID, Data: data})
			want[id] = seq
		}
	}
	// Published together, acknowledgements awaited at the end: the turns
	// arrive faster than one at a time could apply them, on any machine.
	stored, err := h.bus.PublishBatch(context.Background(), burst)
	require.NoError(t, err)
	require.NotContains(t, stored, false)
	h.waitApplied(t, want)
	batches, turns := h.metrics.Histogram("mnemos.accounting.batch_size", "", "")
	require.Positive(t, batches, "some turns shared a transaction")
	// A quiet machine applies the 200 turns in 91 to 97 batches, about two
	// turns a batch, and a busy CI machine in about 100; turns each in a
	// transaction of their own would take 200. The bound asks for a quarter
	// of the transactions or more saved.
	t.Logf("%v turns in %v batches", turns, batches)
	require.LessOrEqual(t, 4*float64(batches), 3*turns, "a quarter of the transactions or more saved by sharing")
	require.EqualValues(t, sessions*rounds, h.metrics.Sum("mnemos.turns.accounted", "outcome", "applied"), "every turn applied once")
}
