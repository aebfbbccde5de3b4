package cpu_test

import (
	"context"
	"testing"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/stretchr/testify/require"
)

func TestPacerRestsAfterEachStretchOfWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	var none *cpu.Pacer
	require.NoError(t, none.Pause(ctx), "a nil pacer paces nothing")
	require.Zero(t, none.Rested())

	// No work allowed between rests: every pause rests.
	p := cpu.NewPacer(0, time.Millisecond)
	for range 3 {
		require.NoError(t, p.Pause(ctx))
	}
	require.Equal(t, 3*time.Millisecond, p.Rested())

	// A stretch of work not yet over: no rest.
	long := cpu.NewPacer(time.Hour, time.Hour)
	require.NoError(t, long.Pause(ctx))
	require.Zero(t, long.Rested())

	// A request that ends stops resting at once, with its context's error.
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, cpu.NewPacer(0, time.Hour).Pause(stopped), context.Canceled)
}
