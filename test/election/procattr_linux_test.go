package election

import "syscall"

// candidateProcAttr makes the kernel kill a subprocess candidate when the test
// process dies, so none outlives a crashed test run.
func candidateProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
