package cpu

import (
	"runtime"
	"syscall"
)

// backgroundNice is the nice value of a thread running Background work:
// the lowest priority a thread can have.
const backgroundNice = 19

// lowerThisThread locks the calling goroutine to its thread and lowers that
// thread's priority. It never unlocks: a goroutine that ends locked ends
// its thread with it, so no lowered thread goes back to serve other
// goroutines.
func lowerThisThread() {
	runtime.LockOSThread()
	// On Linux a thread id names one thread, and its nice value is its
	// own. Raising one's own nice value needs no privilege; a failure
	// leaves the thread as it was.
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), backgroundNice)
}
