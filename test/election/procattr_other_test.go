//go:build !linux

package election

import "syscall"

// candidateProcAttr: without Pdeathsig, a subprocess candidate still exits when
// its stdin (a pipe from the test process) closes.
func candidateProcAttr() *syscall.SysProcAttr { return nil }
