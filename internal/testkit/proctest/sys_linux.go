package proctest

import "syscall"

// sysProcAttr has the kernel kill a child when the test process dies, so a
// test binary that times out leaves nothing running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
