package gateway_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// TestAnEarlierReleasesSnapshotIsReplacedNotCountedABreak: a context
// snapshot whose prefix hash is an earlier release's (SHA-256, 32 bytes)
// is replaced by this release's, and no cache break is counted for it; a
// snapshot of this release's kind that no longer matches is one.
func TestAnEarlierReleasesSnapshotIsReplacedNotCountedABreak(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	h.saveSession(t, "s1", func(s *sessionstate.Session) { s.MemoryScope = map[string]string{"user": "u-1"} })
	read := func() {
		t.Helper()
		status, _, raw := h.call(t, "GET", "/v1/sessions/s1/context", "key-acme", "", nil)
		require.Equal(t, http.StatusOK, status, string(raw))
	}
	snapshot := func() store.ContextSnapshot {
		t.Helper()
		var snap store.ContextSnapshot
		require.NoError(t, h.store.InTx(ctx, "acme", func(tx *store.Tx) (err error) {
			snap, err = tx.ContextSnapshot(ctx, "s1")
			return err
		}))
		return snap
	}
	put := func(snap store.ContextSnapshot) {
		t.Helper()
		require.NoError(t, h.store.InTx(ctx, "acme", func(tx *store.Tx) error { return tx.PutContextSnapshot(ctx, snap) }))
	}
	breaks := func() int64 { return h.metrics.Sum("mnemos.context.cache_breaks", "kind", "unexpected") }

	read()
	ours := snapshot()
	require.Len(t, ours.PrefixHash, 16)
	require.Positive(t, ours.PrefixLen)

	earlier := ours
	sum := sha256.Sum256([]byte("an earlier release hashed this prefix"))
	earlier.PrefixHash = sum[:]
	put(earlier)
	read()
	require.Zero(t, breaks())
	require.Equal(t, ours.PrefixHash, snapshot().PrefixHash, "replaced by this release's hash")

	changed := ours
	changed.PrefixHash = append([]byte{}, ours.PrefixHash...)
	changed.PrefixHash[0] ^= 1
	put(changed)
	read()
	require.EqualValues(t, 1, breaks(), "a prefix of this release's kind that changed is a break")
}
