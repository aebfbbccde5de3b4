package store_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// TestContextSizeMatchesAScan: the size the gateway admits a render by,
// read from two rows, is what summing the size of every message from the
// kept point on gives, for the whole session, a moved kept point, and a kept point past
// the last message; a session that does not exist is empty.
func TestContextSizeMatchesAScan(t *testing.T) {
	t.Parallel()
	st := pgtest.New(t)
	admin := pgtest.Admin(t, st)
	ctx := context.Background()
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))

	const n = 40
	sizes := make([]int64, n)
	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		if _, err := tx.LockSession(ctx, "s1", "main"); err != nil {
			return err
		}
		var total int64
		for i := range n {
			// Sizes vary; some messages are larger by their estimate than
			// by their bytes, so both sides of the measure count.
			content := fmt.Appendf(nil, `[{"type":"text","text":%q}]`, strings.Repeat("x", 10+37*i))
			estimate := int64(i%3) * 200
			sizes[i] = store.MessageSize(content, estimate)
			total += sizes[i]
			sum := sha256.Sum256(content)
			if _, err := tx.InsertMessage(ctx, store.Message{
				SessionID: "s1", UUID: fmt.Sprintf("m%02d", i), Position: int64(i), Seq: 1,
				Role: "user", Content: content, ContentHash: sum[:], EstimateTokens: estimate, BytesThrough: total,
			}); err != nil {
				return err
			}
		}
		return nil
	}))
	require.EqualValues(t, 4*200, sizes[4], "message 4 counts by its estimate, more than its bytes")

	scan := func(keepFrom int64) (want store.ContextSize) {
		for i := keepFrom; i < n; i++ {
			want.Messages++
			want.Bytes += sizes[i]
		}
		return want
	}
	sized := func(id string) store.ContextSize {
		var got store.ContextSize
		require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
			var err error
			got, err = tx.ContextSize(ctx, id)
			return err
		}))
		return got
	}

	for _, keepFrom := range []int64{0, 1, 17, n - 1, n, n + 5} {
		// A compaction moves the kept point; the test moves it directly.
		_, err := admin.Exec(ctx, `UPDATE sessions SET keep_from = $1 WHERE tenant_id = 'acme' AND session_id = 's1'`, keepFrom)
		require.NoError(t, err)
		want := scan(keepFrom)
		require.Equal(t, want, sized("s1"), "kept from %d", keepFrom)
		if keepFrom == 0 {
			require.EqualValues(t, n, want.Messages)
			require.Positive(t, want.Bytes)
		}
	}
	require.Equal(t, store.ContextSize{}, sized("absent"))
}
