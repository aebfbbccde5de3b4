package cpu_test

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/stretchr/testify/require"
)

// niceOfThisThread is the calling thread's nice value. The raw system call
// answers 20 - nice, so that its answers are never negative.
func niceOfThisThread(t *testing.T) int {
	t.Helper()
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	require.NoError(t, err)
	return 20 - prio
}

func TestBackgroundRunsAtTheLowestPriorityAndLeavesTheCallerAlone(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := niceOfThisThread(t)
	require.Less(t, before, 19, "the test itself must not run at the lowest priority")

	var inside int
	ran := false
	cpu.Background(func() {
		ran = true
		inside = niceOfThisThread(t)
	})
	require.True(t, ran)
	require.Equal(t, 19, inside, "the work ran at nice 19")
	require.Equal(t, before, niceOfThisThread(t), "the caller's thread kept its priority")

	// The lowered thread ended with its goroutine: work that follows on
	// fresh goroutines runs at the ordinary priority.
	for range 20 {
		done := make(chan int)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			done <- niceOfThisThread(t)
		}()
		require.Equal(t, before, <-done, "no thread lowered by Background serves other goroutines")
	}
}

func TestApartRunsOnAThreadOfItsOwnAtTheCallersPriority(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	caller := syscall.Gettid()
	before := niceOfThisThread(t)

	var thread, inside int
	cpu.Apart(func() {
		thread = syscall.Gettid()
		inside = niceOfThisThread(t)
	})
	require.NotEqual(t, caller, thread, "the work ran on a thread of its own")
	require.Equal(t, before, inside, "at the ordinary priority")
}

func TestBackgroundAndApartRaiseAPanicInTheCaller(t *testing.T) {
	require.PanicsWithValue(t, "boom", func() {
		cpu.Background(func() { panic("boom") })
	})
	require.PanicsWithValue(t, "boom", func() {
		cpu.Apart(func() { panic("boom") })
	})
}

// TestAPacedJobCountsTheCPUItGotNotTheTimeThatPassed: on Apart's thread,
// from the first rest on, a stretch of work is the CPU time the thread
// ran. A job that waited (as a starved one waits for a core) has not
// worked and does not rest; one that ran its stretch rests.
func TestAPacedJobCountsTheCPUItGotNotTheTimeThatPassed(t *testing.T) {
	var first, waited, ran time.Duration
	spin := func(d time.Duration) {
		for start := time.Now(); time.Since(start) < d; {
			busy()
		}
	}
	cpu.Apart(func() {
		ctx := context.Background()
		p := cpu.NewPacer(20*time.Millisecond, time.Millisecond)
		spin(30 * time.Millisecond) // the first stretch, by the clock
		require.NoError(t, p.Pause(ctx))
		first = p.Rested()

		time.Sleep(60 * time.Millisecond) // three stretches by the clock, none by the CPU
		require.NoError(t, p.Pause(ctx))
		waited = p.Rested() - first

		spin(100 * time.Millisecond)
		require.NoError(t, p.Pause(ctx))
		ran = p.Rested() - first - waited
	})
	require.Equal(t, time.Millisecond, first, "the first stretch ran its work")
	require.Zero(t, waited, "a stretch spent waiting is not work")
	require.Equal(t, time.Millisecond, ran, "a stretch spent running is")
}

var sink int

// busy spends a little CPU.
func busy() {
	for i := range 10000 {
		sink += i
	}
}
