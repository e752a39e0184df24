package sharding_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
)

// TestReplicasOfDifferentShapesNeverOwnAnObjectTogether pins issue 25's defect 3 in
// fake time: replicas of one ring at S=4 and S=8 share its Leases (shard i is one
// Lease to both, a different hash range to each). Whichever order they start in (one
// after the other, at the same instant, several of each), at no instant do two of
// them own one object, and one shape leads every shard while the other refuses. When
// the leading shape's replicas go (a graceful leave, or a crash), the other takes the
// ring: changing S needs no new ring name.
func TestReplicasOfDifferentShapesNeverOwnAnObjectTogether(t *testing.T) {
	uids := make([]string, 10000)
	rnd := rand.New(rand.NewPCG(25, 3))
	for i := range uids {
		uids[i] = fmt.Sprintf("%08x-%04x", rnd.Uint32(), i)
	}
	for _, tc := range []struct {
		name  string
		first []string // started at once, then after 5s the rest
		rest  []string
		crash bool // the first shape's replicas crash instead of leaving
	}{
		{name: "S=4 then S=8", first: []string{"a4"}, rest: []string{"b8"}},
		{name: "S=8 then S=4", first: []string{"a8"}, rest: []string{"b4"}},
		{name: "at once", first: []string{"a4", "b8"}},
		{name: "two of each at once", first: []string{"a4", "b8", "c4", "d8"}},
		{name: "S=4 then S=8, crash", first: []string{"a4", "c4"}, rest: []string{"b8", "d8"}, crash: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { checkShapes(t, uids, tc.first, tc.rest, tc.crash) })
		})
	}
}

// checkShapes starts first, then rest, checks that one shape leads and the other
// refuses, stops the leading shape's replicas and checks that the others take the
// ring; no object owned twice throughout.
func checkShapes(t *testing.T, uids, first, rest []string, crash bool) {
	stores := sharding.NewMemoryStores(8)
	log := &shardingtest.Shapes{}
	replicas := map[string]*replica{}
	shapeOf := func(id string) int { return int(id[len(id)-1] - '0') }
	defer func() {
		for _, r := range replicas {
			r.stop()
		}
	}()
	start := func(ids []string) {
		for _, id := range ids {
			ring, _ := sharding.NewRing(shapeOf(id))
			replicas[id] = startReplicaOf(t, stores, id, shapeOf(id), log.OnAcquired(id, ring))
		}
	}
	start(first)
	time.Sleep(5 * time.Second)
	start(rest)
	time.Sleep(10 * time.Second)

	leading, waiting := splitByLeading(replicas, shapeOf)
	if len(leading) == 0 || len(waiting) == 0 {
		t.Fatalf("leading %v, waiting %v: want one shape leading, the other waiting", leading, waiting)
	}
	for _, r := range waiting {
		if !r.sharder.Refusing() || r.sharder.Stats().ShapeRefusals == 0 {
			t.Errorf("%s: Refusing %v, stats %+v: want refusing", r.id, r.sharder.Refusing(), r.sharder.Stats())
		}
	}
	for _, r := range leading {
		if len(r.sharder.Mismatched()) != len(waiting) {
			t.Errorf("%s sees mismatched %v, want the %d waiting replicas", r.id, r.sharder.Mismatched(), len(waiting))
		}
	}
	for _, r := range leading {
		if crash {
			r.crash()
		} else {
			r.stop()
		}
	}
	time.Sleep(4 * testLease)
	owned := 0
	for _, r := range waiting {
		owned += len(r.sharder.Owned())
		if r.sharder.Refusing() {
			t.Errorf("%s still refuses after the other shape went", r.id)
		}
	}
	if want := shapeOf(waiting[0].id); owned != want {
		t.Errorf("after the other shape went, the waiting replicas lead %d shards, want %d", owned, want)
	}
	for _, r := range replicas {
		r.stop()
	}
	if n := log.DoublyOwned(uids); n != 0 {
		t.Errorf("%d of %d objects were owned by two replicas at once, want 0", n, len(uids))
	}
}

// splitByLeading returns the replicas that lead shards and those that lead none; it
// reports an empty leading set unless all that lead share one shape and none of
// that shape waits.
func splitByLeading(replicas map[string]*replica, shapeOf func(string) int) (leading, waiting []*replica) {
	shapes := map[int]bool{}
	for _, r := range replicas {
		if len(r.sharder.Owned()) > 0 {
			shapes[shapeOf(r.id)] = true
		}
	}
	if len(shapes) != 1 {
		return nil, nil
	}
	for _, r := range replicas {
		if shapes[shapeOf(r.id)] {
			leading = append(leading, r)
		} else {
			waiting = append(waiting, r)
		}
	}
	return leading, waiting
}
