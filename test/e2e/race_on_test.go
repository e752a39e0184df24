//go:build race

package e2e

// raceEnabled builds the baton binary with the race detector when the
// tests run with it, which also reuses the test's build cache.
const raceEnabled = true
