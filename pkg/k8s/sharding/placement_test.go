package sharding_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/baton-dev/baton/internal/testseed"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// TestPlacementRandomized runs random histories of joins and leaves over random rings
// and checks every placement (checkPlacement) and every change (checkMoves).
func TestPlacementRandomized(t *testing.T) {
	var events, excess int
	for _, seed := range testseed.Seeds(t, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10) {
		rng := rand.New(rand.NewPCG(seed, 0x91ace))
		for range 5 {
			shards := []int{sharding.DefaultShards, 16, 100, 256, 1 + rng.IntN(300)}[rng.IntN(5)]
			ring := mustRing(t, shards)
			var members []string
			next := 0
			join := func() {
				members = append(members, fmt.Sprintf("replica-%d-%x", next, rng.Uint32()))
				next++
			}
			join()
			p := sharding.Place(ring, members)
			checkPlacement(t, seed, ring, members, p)
			for range 20 {
				before, leaving := p, ""
				if len(members) > 1 && (len(members) > 16 || rng.IntN(2) == 0) {
					k := rng.IntN(len(members))
					leaving = members[k]
					members = slices.Delete(members, k, k+1)
				} else {
					join()
				}
				p = sharding.Place(ring, members)
				checkPlacement(t, seed, ring, members, p)
				events++
				excess += checkMoves(t, seed, ring, members, leaving, before, p)
			}
		}
	}
	t.Logf("%d joins and leaves, %.2f shards moved beyond the minimum on average", events, float64(excess)/float64(events))
}

// checkPlacement: every shard has exactly one owner, a member; shares differ by at most
// one and none is above ceil(S/N); the placement does not depend on the members' order.
func checkPlacement(t *testing.T, seed uint64, ring sharding.Ring, members []string, p sharding.Placement) {
	t.Helper()
	s, n := ring.Shards(), len(members)
	count := map[string]int{}
	for shard := range s {
		o := p.Owner(shard)
		if !slices.Contains(members, o) {
			t.Fatalf("seed %d S=%d N=%d: shard %d owned by %q, not a member", seed, s, n, shard, o)
		}
		count[o]++
	}
	lo, hi := s, 0
	total := 0
	for _, m := range members {
		c := len(p.Shards(m))
		if c != count[m] {
			t.Fatalf("seed %d: Shards(%s) has %d shards, Owner says %d", seed, m, c, count[m])
		}
		lo, hi, total = min(lo, c), max(hi, c), total+c
	}
	if total != s {
		t.Fatalf("seed %d S=%d N=%d: %d shards owned in all", seed, s, n, total)
	}
	if hi > (s+n-1)/n || hi-lo > 1 {
		t.Fatalf("seed %d S=%d N=%d: shares from %d to %d, want at most ceil(S/N)=%d and within one", seed, s, n, lo, hi, (s+n-1)/n)
	}
	shuffled := slices.Clone(members)
	rand.New(rand.NewPCG(seed, uint64(n))).Shuffle(n, func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	if q := sharding.Place(ring, shuffled); q.Moves(p) != 0 {
		t.Fatalf("seed %d S=%d N=%d: the members' order moved %d shards", seed, s, n, q.Moves(p))
	}
}

// checkMoves: a join (leaving "") or a leave moves at most the minimum plus
// 2·ceil(S/N'), N' the larger of the two member counts. The minimum is the joining
// member's new share, or the leaving member's old share: those shards must move, and
// a balanced placement needs no others moved. It returns the moves beyond the minimum.
//
// Why the allowance: Place is a pure function of the members, so it cannot keep the
// previous owner of a shard only because it was the owner; when shares shrink or grow
// by one, which members hold the larger share changes, and those few shards cascade.
func checkMoves(t *testing.T, seed uint64, ring sharding.Ring, members []string, leaving string, before, after sharding.Placement) int {
	t.Helper()
	s := ring.Shards()
	var minimum, n int
	if leaving == "" {
		minimum, n = len(after.Shards(members[len(members)-1])), len(members)
	} else {
		minimum, n = len(before.Shards(leaving)), len(members)+1
	}
	moves := before.Moves(after)
	if limit := minimum + 2*((s+n-1)/n); moves < minimum || moves > limit {
		t.Fatalf("seed %d S=%d: %s moved %d shards, want %d to %d", seed, s, map[bool]string{true: "a join", false: "a leave"}[leaving == ""], moves, minimum, limit)
	}
	return moves - minimum
}

func TestPlaceEdges(t *testing.T) {
	ring := mustRing(t, 8)
	if p := sharding.Place(ring, nil); p.Owner(0) != "" || p.Shards("") != nil {
		t.Errorf("no members: owner %q, want none", p.Owner(0))
	}
	p := sharding.Place(ring, []string{"a", "a", "b"})
	if len(p.Shards("a")) != 4 || len(p.Shards("b")) != 4 {
		t.Errorf("duplicate member: a %v, b %v, want 4 each", p.Shards("a"), p.Shards("b"))
	}
	if p.Owner(-1) != "" || p.Owner(8) != "" {
		t.Errorf("owner of shards outside the ring: %q %q", p.Owner(-1), p.Owner(8))
	}
	many := make([]string, 20)
	for i := range many {
		many[i] = fmt.Sprint("m", i)
	}
	p = sharding.Place(ring, many) // more members than shards: 8 own one, 12 none
	owners := 0
	for _, m := range many {
		if c := len(p.Shards(m)); c > 1 {
			t.Fatalf("%s owns %d of 8 shards among 20 members", m, c)
		} else {
			owners += c
		}
	}
	if owners != 8 {
		t.Fatalf("%d shards owned, want 8", owners)
	}
}

func ExamplePlace() {
	ring, _ := sharding.NewRing(8)
	p := sharding.Place(ring, []string{"replica-a", "replica-b", "replica-c"})
	for _, m := range []string{"replica-a", "replica-b", "replica-c"} {
		fmt.Println(m, len(p.Shards(m)))
	}
	// Output:
	// replica-a 3
	// replica-b 3
	// replica-c 2
}
