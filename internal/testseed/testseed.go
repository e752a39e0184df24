// Package testseed picks the seeds a seeded randomized test runs: its own
// list, or the one seed the BATON_SEED environment variable names, so that
// a failure reported with its seed replays with
//
//	BATON_SEED=<seed> go test -run <TestName> ./<package>
package testseed

import (
	"os"
	"strconv"
	"testing"
)

// Env is the environment variable that names the one seed to run.
const Env = "BATON_SEED"

// Seeds returns the seed Env names, alone, or else defaults. A value of
// Env that is not an unsigned decimal number fails tb at once.
func Seeds(tb testing.TB, defaults ...uint64) []uint64 {
	tb.Helper()
	s := os.Getenv(Env)
	if s == "" {
		return defaults
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		tb.Fatalf("%s=%q: not a seed: %v", Env, s, err)
	}
	return []uint64{v}
}
