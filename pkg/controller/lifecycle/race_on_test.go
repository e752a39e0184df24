//go:build race

package lifecycle_test

// raceEnabled: the race detector's instrumentation adds a few allocations
// (sync.Pool, for one, drops items at random under it), so the allocation
// guards allow for them.
const raceEnabled = true
