package cpu_test

import (
	"runtime"
	"syscall"
	"testing"

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

func TestBackgroundRaisesAPanicInTheCaller(t *testing.T) {
	require.PanicsWithValue(t, "boom", func() {
		cpu.Background(func() { panic("boom") })
	})
}
