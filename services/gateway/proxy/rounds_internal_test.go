package proxy

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRoundRecordsKeepEachSessionsOrder: records of one session run one
// after another in the order queued, while another session's run beside
// them; drain waits for all, and a record queued after it runs at once.
func TestRoundRecordsKeepEachSessionsOrder(t *testing.T) {
	t.Parallel()
	var q roundRecords
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	hold := make(chan struct{})
	other := make(chan struct{})
	q.run("a", func() { <-hold; note("a1") })
	q.run("a", func() { note("a2") })
	q.run("b", func() { note("b1"); close(other) })
	<-other // b ran although a's first record is held
	q.run("a", func() { note("a3") })
	close(hold)
	q.drain()
	require.Equal(t, []string{"b1", "a1", "a2", "a3"}, order)

	ran := false
	q.run("a", func() { ran = true })
	require.True(t, ran, "after drain a record runs in its caller")
}
