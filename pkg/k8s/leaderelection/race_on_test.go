//go:build race

package leaderelection

// raceEnabled: the race detector's instrumentation adds allocations of its own, so
// the allocation guards allow for them.
const raceEnabled = true
