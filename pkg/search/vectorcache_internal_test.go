package search

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/embed"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// TestTheVectorCacheReadsOnlyWhatMovedAndStaysInItsSize: a session is read
// once per version; the least recently used go when the cache is full, and
// any left unread past vectorCacheIdle.
func TestTheVectorCacheReadsOnlyWhatMovedAndStaysInItsSize(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	vec := embed.Encode([]float32{1, 0, 0, 0})
	const perSession = 2*(4*4+16) + 8 // two vectors of four floats, their positions and offsets
	c := newVectorCache(3*perSession, func() time.Time { return now })
	var reads []string
	read := func(ids []string) ([]store.MessageVector, error) {
		reads = append(reads, fmt.Sprint(ids))
		var out []store.MessageVector
		for _, id := range ids {
			out = append(out, store.MessageVector{SessionID: id, Position: 0, Vector: vec}, store.MessageVector{SessionID: id, Position: 1, Vector: vec})
		}
		return out, nil
	}
	get := func(sessions ...store.VectorSession) []*cachedVectors {
		t.Helper()
		out, err := c.sessionVectors("acme", "m", sessions, read)
		require.NoError(t, err)
		return out
	}
	a, b, d := store.VectorSession{SessionID: "a", Version: 1}, store.VectorSession{SessionID: "b", Version: 1}, store.VectorSession{SessionID: "d", Version: 1}
	got := get(a, b, store.VectorSession{SessionID: "none", Version: 0})
	require.Len(t, got, 2, "a session without vectors is not read")
	require.Equal(t, []int64{1, 0}, got[0].positions, "the newest first")
	require.Equal(t, []string{"[a b]"}, reads)
	get(a, b)
	require.Len(t, reads, 1, "both cached")
	a.Version = 2
	get(a, b)
	require.Equal(t, "[a]", reads[1], "only the session whose version moved is read again")

	get(d)
	sessions, bytes := c.size()
	require.Equal(t, 3, sessions)
	require.Equal(t, int64(3*perSession), bytes)
	get(store.VectorSession{SessionID: "e", Version: 1})
	sessions, _ = c.size()
	require.Equal(t, 3, sessions)
	get(a, d)
	require.Len(t, reads, 4, "a and d stayed: b was the least recently used")

	now = now.Add(vectorCacheIdle + time.Second)
	get(a)
	sessions, bytes = c.size()
	require.Equal(t, 1, sessions, "the sessions unread past the idle time went")
	require.Equal(t, int64(perSession), bytes)
}
