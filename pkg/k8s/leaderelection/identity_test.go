package leaderelection

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestDuplicateIdentity: two candidates started with the same identity on one lease:
// the one that does not lead sees the other's renews name its identity and reports
// them (Stats.DuplicateIdentity); candidates with their own identities, also after a
// restart that finds the lease naming the previous incarnation, report nothing.
func TestDuplicateIdentity(t *testing.T) {
	run := func(t *testing.T, store LeaseStore, ids []string, d time.Duration) []*Elector {
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		var electors []*Elector
		for _, id := range ids {
			e, err := NewWithStore(testConfig(id), store, Callbacks{}, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			electors = append(electors, e)
			wg.Go(func() { _ = e.Start(ctx) })
		}
		time.Sleep(d)
		cancel()
		wg.Wait()
		return electors
	}
	t.Run("twins", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			es := run(t, NewMemoryStore("lease"), []string{"a", "a"}, time.Minute)
			if n := es[0].Stats().DuplicateIdentity + es[1].Stats().DuplicateIdentity; n == 0 {
				t.Error("two candidates named a ran for a minute: no duplicate identity reported")
			}
		})
	})
	t.Run("alone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			mem := NewMemoryStore("lease")
			first := run(t, mem, []string{"a", "b"}, time.Minute)
			// A restart of a: the lease names it, written by its previous incarnation.
			second := run(t, mem, []string{"a", "b"}, time.Minute)
			for _, e := range append(first, second...) {
				if n := e.Stats().DuplicateIdentity; n != 0 {
					t.Errorf("%s reported %d duplicate identities, want 0", e.Identity(), n)
				}
			}
		})
	})
}
