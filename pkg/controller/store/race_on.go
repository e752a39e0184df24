//go:build race

package store

// raceEnabled: built with the race detector, Memory checks that no stored
// map is modified.
const raceEnabled = true
