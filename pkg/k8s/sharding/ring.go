package sharding

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// DefaultShards is the number of shards of a ring when none is given: enough that
// up to a few dozen replicas get shares within one shard of each other (64/N). A
// quiet ring's cost does not grow with it (shard Leases are written only when they
// change hands: docs/design/sharding-renewal.md); a move, a start and a crash do.
const DefaultShards = 64

// MaxShards bounds the shards of a ring: each shard is a Lease and an elector in
// every replica (listed when its watch opens), and placement sorts shards × members
// scores.
const MaxShards = 4096

// UIDField is the field a ring hashes, in the syntax of a shard selector.
const UIDField = "object.metadata.uid"

// Ring divides the 64-bit FNV-1a hash space of object UIDs into a fixed number of
// shards, each a contiguous range, with the hash function and range semantics of
// Kubernetes' sharded list and watch (KEP-5866): shard i holds the hashes h with
// ceil(i·2⁶⁴/S) ≤ h < ceil((i+1)·2⁶⁴/S). The ranges cover the hash space without gap
// or overlap, so every UID is in exactly one shard. The number of shards is fixed
// for the life of a ring: every replica of a controller must use the same.
//
// The zero Ring is not usable; call NewRing. A Ring is a value: copy it freely.
type Ring struct {
	shards int
}

// NewRing returns the ring of shards shards, from 1 to MaxShards; 0 means
// DefaultShards.
func NewRing(shards int) (Ring, error) {
	if shards == 0 {
		shards = DefaultShards
	}
	if shards < 1 || shards > MaxShards {
		return Ring{}, fmt.Errorf("%w: shards is %d, want 1 to %d", ErrInvalidRing, shards, MaxShards)
	}
	return Ring{shards: shards}, nil
}

// Shards returns the number of shards S; they are numbered 0 to S-1.
func (r Ring) Shards() int { return r.shards }

// Shape returns what decides the ring's hash ranges, as recorded on every member
// Lease (ShapeAnnotation): the hash, what it hashes, the range rule and S, e.g.
// "fnv1a64-uid-ranges/64". Two replicas whose shapes differ give one shard name
// different objects, so they must never lead shards at once (docs/design/sharding.md,
// # Ring shape).
func (r Ring) Shape() string { return fmt.Sprintf("fnv1a64-uid-ranges/%d", r.shards) }

// Hash returns the 64-bit FNV-1a hash of uid, the hash a shard selector's
// shardRange(object.metadata.uid, ...) compares with its bounds.
func Hash(uid string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(uid)) // a hash.Hash never fails
	return h.Sum64()
}

// ShardOf returns the shard of the object with the given UID.
func (r Ring) ShardOf(uid string) int { return r.shardOfHash(Hash(uid)) }

// shardOfHash is floor(h·S/2⁶⁴), the i with start(i) ≤ h < start(i+1).
func (r Ring) shardOfHash(h uint64) int {
	hi, _ := bits.Mul64(h, uint64(r.shards))
	return int(hi)
}

// start returns ceil(i·2⁶⁴/S) for 0 ≤ i < S.
func (r Ring) start(i int) uint64 {
	q, rem := bits.Div64(uint64(i), 0, uint64(r.shards))
	if rem != 0 {
		q++
	}
	return q
}

// Range is a contiguous range of hashes, First to Last inclusive. (The exclusive end
// of the last shard, 2⁶⁴, has no uint64; a selector writes it as
// '0x10000000000000000'.)
type Range struct {
	First, Last uint64
}

// Contains reports whether h is in the range.
func (rg Range) Contains(h uint64) bool { return rg.First <= h && h <= rg.Last }

// String returns the range as a shardRange term of a shard selector on the UID.
func (rg Range) String() string {
	end := "0x10000000000000000"
	if rg.Last != math.MaxUint64 {
		end = fmt.Sprintf("0x%016x", rg.Last+1)
	}
	return fmt.Sprintf("shardRange(%s, '0x%016x', '%s')", UIDField, rg.First, end)
}

// Range returns the hashes of shard, or an error wrapping ErrInvalidRing when shard is
// not in the ring.
func (r Ring) Range(shard int) (Range, error) {
	if err := r.check(shard); err != nil {
		return Range{}, err
	}
	return r.rangeOf(shard, shard), nil
}

// rangeOf returns the hashes of shards first to last, adjacent shards of the ring.
func (r Ring) rangeOf(first, last int) Range {
	rg := Range{First: r.start(first), Last: math.MaxUint64}
	if last+1 < r.shards {
		rg.Last = r.start(last+1) - 1
	}
	return rg
}

func (r Ring) check(shard int) error {
	if r.shards == 0 {
		return fmt.Errorf("%w: the zero Ring has no shards (use NewRing)", ErrInvalidRing)
	}
	if shard < 0 || shard >= r.shards {
		return fmt.Errorf("%w: shard %d is not in 0 to %d", ErrInvalidRing, shard, r.shards-1)
	}
	return nil
}

// Ranges returns the hash ranges of a set of shards, in order, adjacent shards merged
// into one range. Duplicates count once. It returns an error wrapping ErrInvalidRing
// for a shard not in the ring and ErrNoShards for an empty set.
func (r Ring) Ranges(shards []int) ([]Range, error) {
	if len(shards) == 0 {
		return nil, ErrNoShards
	}
	sorted := slices.Clone(shards)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	for _, s := range sorted {
		if err := r.check(s); err != nil {
			return nil, err
		}
	}
	var out []Range
	first := sorted[0]
	for i, s := range sorted {
		if i+1 < len(sorted) && sorted[i+1] == s+1 {
			continue // the run goes on
		}
		out = append(out, r.rangeOf(first, s))
		if i+1 < len(sorted) {
			first = sorted[i+1]
		}
	}
	return out, nil
}

// Selector returns the shard selector (metav1.ListOptions.ShardSelector) that selects
// exactly the objects of a set of shards: one shardRange term per run of adjacent
// shards, joined with " || ", e.g. for shards 2 and 3 of 4
//
//	shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')
//
// Bounds are quoted, lowercase, 16 hex digits, the end of the last shard
// '0x10000000000000000', as the API server requires. Errors as for Ranges: there is
// no selector of no shards, since the empty selector selects everything.
func (r Ring) Selector(shards []int) (string, error) {
	ranges, err := r.Ranges(shards)
	if err != nil {
		return "", err
	}
	terms := make([]string, len(ranges))
	for i, rg := range ranges {
		terms[i] = rg.String()
	}
	return strings.Join(terms, " || "), nil
}
