package batontest

import (
	"testing"
	"time"
)

// WaitFor polls cond every 5ms until it holds, or fails t after timeout, naming what it
// waited for. It is for state that replicas change on their own against a real API
// server, where no event says "now"; code on a fake clock waits for that clock instead.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
