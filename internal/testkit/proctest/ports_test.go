package proctest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFreePortsAreOutsideTheEphemeralRange: a port a node keeps across its
// restarts is one no outgoing connection can take meanwhile, and each is
// handed out once.
func TestFreePortsAreOutsideTheEphemeralRange(t *testing.T) {
	start := ephemeralStart()
	seen := map[int]bool{}
	for range 50 {
		p := freePort(t)
		require.Less(t, p, start)
		require.False(t, seen[p], "port %d handed out twice", p)
		seen[p] = true
	}
}
