package testseed_test

import (
	"slices"
	"testing"

	"github.com/baton-dev/baton/internal/testseed"
)

func TestSeeds(t *testing.T) {
	t.Setenv(testseed.Env, "")
	if got := testseed.Seeds(t, 1, 2, 3); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("without %s: %v, want the defaults", testseed.Env, got)
	}
	t.Setenv(testseed.Env, "42")
	if got := testseed.Seeds(t, 1, 2, 3); !slices.Equal(got, []uint64{42}) {
		t.Fatalf("with %s=42: %v, want [42]", testseed.Env, got)
	}
}

// fatalTB records a Fatalf instead of ending the test.
type fatalTB struct {
	testing.TB
	failed bool
}

func (f *fatalTB) Helper()               {}
func (f *fatalTB) Fatalf(string, ...any) { f.failed = true }

func TestSeedsRefusesANonNumber(t *testing.T) {
	t.Setenv(testseed.Env, "seven")
	tb := &fatalTB{TB: t}
	testseed.Seeds(tb, 1)
	if !tb.failed {
		t.Fatalf("%s=seven did not fail the test", testseed.Env)
	}
}
