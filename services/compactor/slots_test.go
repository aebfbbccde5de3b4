package compactor

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/llm"
)

// calls is a provider that reports, at each call, whether a slot of slots
// was free while the call waited for its answer.
type calls struct {
	name      string
	slots     cpu.Heavy
	freeSlots atomic.Int32
}

func (c *calls) Name() string { return c.name }

func (c *calls) Complete(context.Context, llm.Request) (llm.Response, error) {
	c.freeSlots.Store(int32(cap(c.slots) - len(c.slots)))
	return llm.Response{Text: "summary"}, nil
}

func TestAModelOverTheNetworkWaitsWithoutASlot(t *testing.T) {
	t.Parallel()
	slots := cpu.NewHeavy(1)
	remote := &calls{name: "anthropic", slots: slots}
	ctx, give, err := holdSlot(context.Background(), slots, nil)
	require.NoError(t, err)
	require.Len(t, slots, 1, "the compaction holds the only slot")

	resp, err := model(remote).Complete(ctx, llm.Request{})
	require.NoError(t, err)
	require.Equal(t, "summary", resp.Text)
	require.EqualValues(t, 1, remote.freeSlots.Load(), "the slot was free while the model answered")
	require.Len(t, slots, 1, "and held again after")

	give()
	give() // ending the hold twice gives one slot back
	require.Empty(t, slots)
}

func TestTheBuiltinProviderWorksHoldingTheSlot(t *testing.T) {
	t.Parallel()
	slots := cpu.NewHeavy(1)
	local := &calls{name: "builtin", slots: slots}
	ctx, give, err := holdSlot(context.Background(), slots, nil)
	require.NoError(t, err)
	defer give()
	_, err = model(local).Complete(ctx, llm.Request{})
	require.NoError(t, err)
	require.EqualValues(t, 0, local.freeSlots.Load(), "it summarizes in this process, on the slot")
}

func TestACompactionWaitsForASlot(t *testing.T) {
	t.Parallel()
	slots := cpu.NewHeavy(1)
	_, give, err := holdSlot(context.Background(), slots, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		_, _, err := holdSlot(ctx, slots, nil)
		got <- err
	}()
	require.Never(t, func() bool { return len(got) > 0 }, 100*time.Millisecond, 5*time.Millisecond,
		"a second compaction took the only slot")
	cancel()
	require.ErrorIs(t, <-got, context.Canceled)
	give()
	_, give2, err := holdSlot(context.Background(), slots, nil)
	require.NoError(t, err, "the slot given back is taken")
	give2()
}

func TestDefaultSlotsAreHalfTheCores(t *testing.T) { // not parallel: it sets GOMAXPROCS
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for procs, want := range map[int]int{1: 1, 2: 1, 3: 1, 4: 2, 16: 8} {
		runtime.GOMAXPROCS(procs)
		require.Equal(t, want, defaultSlots(), "GOMAXPROCS %d", procs)
		require.Equal(t, want, DefaultConfig().Slots)
	}
}
