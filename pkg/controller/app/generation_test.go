package app_test

import (
	"testing"
	"testing/synctest"
)

// TestGenerationsMonotonicAcrossFailover is the regression test of pod
// generations numbered per replica: a replica started after several pod
// changes numbered the same set lower than the leader did, so the
// generation it published after taking over went backwards. Every replica
// must publish a set with the same generation, and what is published must
// never go back.
func TestGenerationsMonotonicAcrossFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		a := startNode(t, w, "a", nil)
		if leaderOf(t, a) != a {
			t.Fatal("a does not lead")
		}
		for gen := 2; gen <= 6; gen++ {
			if err := w.Pods.Set(pods(gen, 2)); err != nil {
				t.Fatal(err)
			}
			synced(t, configDoc(2000), pods(gen, 2), a)
		}
		b := startNode(t, w, "b", nil)
		synced(t, configDoc(2000), pods(6, 2), b)
		ca, _ := a.r.Discovery().Current()
		cb, _ := b.r.Discovery().Current()
		if ca.Generation != cb.Generation || ca.Generation != w.Pods.Version() {
			t.Fatalf("the same set has generation %d on a and %d on b (shared version %d)", ca.Generation, cb.Generation, w.Pods.Version())
		}
		term := a.r.Manager().Status().Term
		eventually(t, "a's publish of the newest pods", func() bool { return published(t, w).PodGeneration == ca.Generation })
		before := published(t, w).PodGeneration
		a.stop(t) // releases: b takes over
		if leaderOf(t, b) != b {
			t.Fatal("b does not lead")
		}
		eventually(t, "b's publish", func() bool { return published(t, w).Term > term })
		if after := published(t, w).PodGeneration; after < before {
			t.Errorf("published pod generation went back from %d to %d across the failover", before, after)
		}
	})
}
