package sharding

import (
	"cmp"
	"hash/fnv"
	"slices"
	"strconv"
)

// Placement is which member owns each shard of a ring: the result of Place, the same
// on every replica that sees the same members.
type Placement struct {
	owners []string // by shard; "" when there are no members
}

// Place spreads the shards of ring over members (unique identities; order does not
// matter) by rendezvous hashing with a fair-share cap: every (shard, member) pair has
// a score, a hash of both; the pairs are taken from the highest score down, and a
// pair gives its shard to its member unless the shard is already placed or the member
// has its share. Of N members, S mod N may own ceil(S/N) shards and the others
// floor(S/N), so shares differ by at most one. Every shard is placed (a member with
// room when a shard's last pair comes had room at every earlier pair too).
//
// Stable: a member's scores do not depend on the other members, so a member that
// joins takes mostly shards where it scores highest, and one that leaves frees only
// its own, plus the few shards that move because shares shrink or grow by one
// (TestPlacementMoves states the bound).
//
// Place is a pure function: every replica computes it for itself, no coordination.
// With no members every shard's owner is "".
func Place(ring Ring, members []string) Placement {
	s := ring.Shards()
	p := Placement{owners: make([]string, s)}
	members = slices.Compact(slices.Sorted(slices.Values(members)))
	n := len(members)
	if n == 0 {
		return p
	}
	type pair struct {
		score  uint64
		shard  int
		member int
	}
	pairs := make([]pair, 0, s*n)
	for m, id := range members {
		base := memberHash(id)
		for shard := range s {
			pairs = append(pairs, pair{score: mix64(base ^ mix64(uint64(shard))), shard: shard, member: m})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		if c := cmp.Compare(a.member, b.member); c != 0 {
			return c
		}
		return cmp.Compare(a.shard, b.shard)
	})
	floor, extra := s/n, s%n // extra members may own floor+1
	count := make([]int, n)
	atCeil := 0
	placed := 0
	for _, pr := range pairs {
		if p.owners[pr.shard] != "" {
			continue
		}
		c := count[pr.member]
		full := c == floor+1 || (c == floor && atCeil == extra)
		if full {
			continue
		}
		if c == floor {
			atCeil++
		}
		count[pr.member]++
		p.owners[pr.shard] = members[pr.member]
		if placed++; placed == s {
			break
		}
	}
	return p
}

// Owner returns the member that owns shard, "" for a shard not in the ring or with no
// members.
func (p Placement) Owner(shard int) string {
	if shard < 0 || shard >= len(p.owners) {
		return ""
	}
	return p.owners[shard]
}

// Shards returns the shards member owns, in order.
func (p Placement) Shards(member string) []int {
	var out []int
	for s, o := range p.owners {
		if o == member && member != "" {
			out = append(out, s)
		}
	}
	return out
}

// Moves counts the shards whose owner differs between p and q (placements of the same
// ring).
func (p Placement) Moves(q Placement) int {
	n := 0
	for s := range p.owners {
		if s >= len(q.owners) || p.owners[s] != q.owners[s] {
			n++
		}
	}
	return n
}

// memberHash hashes a member's identity; the length prefix keeps the input unambiguous.
func memberHash(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(strconv.Itoa(len(id))))
	h.Write([]byte{':'})
	h.Write([]byte(id))
	return mix64(h.Sum64())
}

// mix64 is a 64-bit finalizer (splitmix64's): FNV-1a alone spreads similar inputs
// badly in the high bits, which the scores' order depends on.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
