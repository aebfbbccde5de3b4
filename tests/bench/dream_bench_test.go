package bench

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/benchmark"
	"github.com/mnemos-ai/mnemos/pkg/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/pkg/view"
)

// BenchmarkMessageTextIndex measures what the dreamer's full-text index of
// the messages (messages_text_search: the text blocks of each message)
// costs the accountant, which stores every message: the messages of the
// fixture sessions (each replayed 20 times) are stored as the accountant stores them, one
// transaction per API round, once as they are, and once with each text
// block turned into a block the index does not read (the same bytes, as
// thinking), in the same run; the ratio of the two rates is the index's cost.
func BenchmarkMessageTextIndex(b *testing.B) {
	st := pgtest.New(b)
	ctx := context.Background()
	require.NoError(b, st.EnsureTenant(ctx, "bench", "bench"))
	var msgs []view.Message
	for _, f := range []string{"short.jsonl", "tool_heavy.jsonl", "subagent.jsonl", "long.jsonl"} {
		for _, m := range loadFixtureSession(b, f, 20).msgs {
			m.UUID, m.Position = fmt.Sprintf("%s-%s", f, m.UUID), int64(len(msgs))
			msgs = append(msgs, m)
		}
	}
	hidden := make([]view.Message, len(msgs))
	textBytes := 0
	for i, m := range msgs {
		hidden[i] = m
		hidden[i].Content = make(turn.Content, len(m.Content))
		for j, blk := range m.Content {
			if blk.Type == turn.BlockText {
				textBytes += len(blk.Text)
				blk = turn.Block{Type: turn.BlockThinking, Thinking: blk.Text}
			}
			hidden[i].Content[j] = blk
		}
	}
	var indexed, unindexed []float64
	round := 0
	for b.Loop() {
		round++
		if round%2 == 1 { // each goes first every other round
			indexed = append(indexed, storeSession(b, st, fmt.Sprintf("indexed-%d", round), msgs))
			unindexed = append(unindexed, storeSession(b, st, fmt.Sprintf("unindexed-%d", round), hidden))
		} else {
			unindexed = append(unindexed, storeSession(b, st, fmt.Sprintf("unindexed-%d", round), hidden))
			indexed = append(indexed, storeSession(b, st, fmt.Sprintf("indexed-%d", round), msgs))
		}
	}
	b.ReportMetric(benchmark.Median(indexed), "indexed-msgs/s")
	b.ReportMetric(benchmark.Median(unindexed), "unindexed-msgs/s")
	b.ReportMetric(benchmark.Median(indexed)/benchmark.Median(unindexed), "ratio")
	b.Logf("stored %d messages (%d bytes of text blocks) per round: %.0f msgs/s with their text indexed, %.0f without (ratio %.2f)",
		len(msgs), textBytes, benchmark.Median(indexed), benchmark.Median(unindexed), benchmark.Median(indexed)/benchmark.Median(unindexed))
}

// storeSession stores msgs as a new session's, one transaction per round,
// and returns the messages stored per second.
func storeSession(b *testing.B, st *store.Store, id string, msgs []view.Message) float64 {
	ctx := context.Background()
	start := time.Now()
	for i := 0; i < len(msgs); {
		j := i
		for j < len(msgs) && msgs[j].Round == msgs[i].Round {
			j++
		}
		err := st.InTx(ctx, "bench", func(tx *store.Tx) error {
			if _, err := tx.LockSession(ctx, id, "main"); err != nil {
				return err
			}
			for _, m := range msgs[i:j] {
				content, err := json.Marshal(m.Content)
				if err != nil {
					return err
				}
				sum := sha256.Sum256(content)
				if _, err := tx.InsertMessage(ctx, store.Message{
					SessionID: id, UUID: m.UUID, Position: m.Position, Seq: m.Round, Role: m.Role,
					Content: content, ContentHash: sum[:], EstimateTokens: m.Tokens,
				}); err != nil {
					return err
				}
			}
			return nil
		})
		require.NoError(b, err)
		i = j
	}
	return float64(len(msgs)) / time.Since(start).Seconds()
}
