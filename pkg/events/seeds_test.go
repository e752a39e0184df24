package events

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/baton-dev/baton/internal/testseed"
)

// freshSeedsEnv names the environment variable that makes a randomized
// test of this package run that many fresh random seeds instead of its
// fixed list, for a soak run.
const freshSeedsEnv = "BATON_FRESH_SEEDS"

// testSeeds returns the seeds a randomized test runs: the one BATON_SEED
// names, or else as many fresh ones as BATON_FRESH_SEEDS says, or else
// fixed, the list CI runs. Each seed is logged, so that a failure names
// the one that replays it.
func testSeeds(tb testing.TB, fixed ...uint64) []uint64 {
	tb.Helper()
	seeds := fixed
	if s := os.Getenv(freshSeedsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			tb.Fatalf("%s=%q: want a positive number of seeds", freshSeedsEnv, s)
		}
		seeds = make([]uint64, n)
		for i := range seeds {
			seeds[i] = rand.Uint64()
		}
	}
	seeds = testseed.Seeds(tb, seeds...)
	tb.Logf("seeds %v (replay one with %s=<seed>)", seeds, testseed.Env)
	return seeds
}
