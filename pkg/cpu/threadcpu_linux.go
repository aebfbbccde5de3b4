package cpu

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// backgroundNice is the nice value of a thread running Background work:
// the lowest priority a thread can have.
const backgroundNice = 19

// lowerThisThread lowers the calling thread's priority. On Linux a thread
// id names one thread, and its nice value is its own. Raising one's own
// nice value needs no privilege; a failure leaves the thread as it was.
func lowerThisThread() {
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), backgroundNice)
}

// threadCPU is the CPU time the calling thread has used, or -1 when it
// cannot be read. It measures a goroutine only while the goroutine stays
// on that thread, as Apart's and Background's do.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return -1
	}
	return time.Duration(ts.Nano())
}
