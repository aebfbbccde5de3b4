package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/benchmark"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// errRollBack ends a benchmark's transaction without its commit.
var errRollBack = errors.New("roll back")

// BenchmarkMessageInsertStatement times the one statement an accountant's
// batch inserts its messages with (Tx.InsertMessages), for the batches of
// 8 turns the sustained ingest makes and the 64 of a saturated one: each
// turn a tool result of 720 bytes and an answer calling the next tool, as
// `mnemos bench` sends. Each statement's transaction is rolled back, so no
// commit's flush is in the time and the table does not grow; the indexes
// are kept up all the same. It reports the median time of a statement, a
// round trip to Postgres and what Postgres does for it: parsing nothing
// (the statement is prepared), the rows, their indexes (the text search's
// among them) and the foreign key's checks.
func BenchmarkMessageInsertStatement(b *testing.B) {
	ctx := context.Background()
	st := pgtest.New(b)
	require.NoError(b, st.EnsureTenant(ctx, "acme", "Acme"))
	result := []byte(`[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"` +
		strings.Repeat(`build output line\n`, 40) + `"}]}]`)
	answer := []byte(`[{"type":"text","text":"Running the tests again."},` +
		`{"type":"tool_use","id":"t2","name":"Bash","input":{"command":"go test ./..."}}]`)
	for _, turns := range []int{8, 64} {
		b.Run(fmt.Sprintf("turns=%d", turns), func(b *testing.B) {
			sessions := make([]string, turns)
			for i := range sessions {
				sessions[i] = fmt.Sprintf("s%d-%d", turns, i)
				require.NoError(b, st.InTx(ctx, "acme", func(tx *store.Tx) error {
					_, err := tx.LockSession(ctx, sessions[i], "main")
					return err
				}))
			}
			msgs := make([]store.Message, 0, 2*turns)
			for _, s := range sessions {
				for j, c := range [][]byte{result, answer} {
					msgs = append(msgs, store.Message{SessionID: s, Seq: 1,
						Role: []string{"user", "assistant"}[j], Content: c, ContentHash: []byte{byte(j)}, EstimateTokens: int64(len(c) / 4),
						IsResponse: j == 1, BytesThrough: int64(len(c))})
				}
			}
			var took []float64
			for round := 0; b.Loop(); round++ {
				// Keys of their own each round: a unique index checks a
				// key against every entry the rolled-back rounds left.
				for i := range msgs {
					msgs[i].UUID, msgs[i].Position = fmt.Sprintf("m%d-%d", round, i), int64(2*round+i%2)
				}
				err := st.InTx(ctx, "acme", func(tx *store.Tx) error {
					start := time.Now()
					if err := tx.InsertMessages(ctx, msgs); err != nil {
						return err
					}
					took = append(took, float64(time.Since(start).Microseconds()))
					return errRollBack
				})
				require.ErrorIs(b, err, errRollBack)
			}
			b.ReportMetric(benchmark.Median(took), "µs/statement")
		})
	}
}
