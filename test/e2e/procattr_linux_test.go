package e2e

import "syscall"

// procAttr makes the kernel kill a baton process when the test process
// dies, so that none outlives a crashed test run.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
