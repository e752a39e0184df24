//go:build race

package leaderelection_test

// raceEnabled: the race detector's instrumentation adds allocations of its own, so
// the allocation guard allows for them.
const raceEnabled = true
