package httpapi

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestKeyGuardIsBounded: a flood of addresses and keys never grows the
// guard past keyGuardCap entries, and an address's window ends on time.
func TestKeyGuardIsBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	k := newKeyGuard(3, time.Minute, 30*time.Second, func() time.Time { return now })
	for i := range 3 * keyGuardCap {
		k.miss(fmt.Sprintf("10.0.%d.%d", i/256, i%256), fmt.Sprintf("key-%d", i))
		require.LessOrEqual(t, len(k.addrs), keyGuardCap)
		require.LessOrEqual(t, len(k.missed), keyGuardCap)
	}
	for range 3 {
		k.miss("192.0.2.1", "wrong")
	}
	wait, blocked := k.blocked("192.0.2.1")
	require.True(t, blocked)
	require.Equal(t, time.Minute, wait)
	require.True(t, k.knownMiss("wrong"))
	now = now.Add(31 * time.Second)
	require.False(t, k.knownMiss("wrong"), "a miss is remembered for missTTL")
	now = now.Add(30 * time.Second)
	_, blocked = k.blocked("192.0.2.1")
	require.False(t, blocked, "the window ended")
}
