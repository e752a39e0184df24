package sharding_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/baton-dev/baton/internal/testseed"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
)

func TestNewRing(t *testing.T) {
	r, err := sharding.NewRing(0)
	if err != nil || r.Shards() != sharding.DefaultShards {
		t.Fatalf("NewRing(0) = %d shards, %v; want %d", r.Shards(), err, sharding.DefaultShards)
	}
	for _, bad := range []int{-1, sharding.MaxShards + 1} {
		_, err := sharding.NewRing(bad)
		if !errors.Is(err, sharding.ErrInvalidRing) || !strings.Contains(err.Error(), fmt.Sprint(bad)) {
			t.Errorf("NewRing(%d): %v, want ErrInvalidRing naming the value", bad, err)
		}
	}
	if _, err := (sharding.Ring{}).Range(0); !errors.Is(err, sharding.ErrInvalidRing) {
		t.Errorf("zero Ring's Range: %v, want ErrInvalidRing", err)
	}
}

// The hash is the API server's: apimachinery's HashField is its hex.
func TestHashIsTheAPIServers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		uid := randomUID(rng)
		if got, want := fmt.Sprintf("%016x", sharding.Hash(uid)), apisharding.HashField(uid); got != want {
			t.Fatalf("Hash(%q) = %s, apimachinery %s", uid, got, want)
		}
	}
}

// The ranges of a ring cover the hash space without gap or overlap, in order, for
// every number of shards.
func TestRangesPartitionTheHashSpace(t *testing.T) {
	for s := 1; s <= sharding.MaxShards; s++ {
		r := mustRing(t, s)
		next := uint64(0)
		for i := range s {
			rg, err := r.Range(i)
			if err != nil {
				t.Fatal(err)
			}
			if rg.First != next || rg.Last < rg.First {
				t.Fatalf("S=%d shard %d: %x..%x, want to start at %x and not be empty", s, i, rg.First, rg.Last, next)
			}
			next = rg.Last + 1
		}
		if next != 0 { // wrapped: the last range ends at 2^64-1
			t.Fatalf("S=%d: last range ends at %x, want ffffffffffffffff", s, next-1)
		}
	}
}

func TestSelectorGolden(t *testing.T) {
	tests := []struct {
		shards int
		set    []int
		want   string
	}{
		{2, []int{1}, "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"},
		{2, []int{0, 1}, "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"},
		{4, []int{3, 0, 0}, "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') || " +
			"shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')"},
		{4, []int{1, 2}, "shardRange(object.metadata.uid, '0x4000000000000000', '0xc000000000000000')"},
		// 2^64/3 = 0x5555555555555555.55...: shard 1 starts at the ceiling.
		{3, []int{1}, "shardRange(object.metadata.uid, '0x5555555555555556', '0xaaaaaaaaaaaaaaab')"},
	}
	for _, tc := range tests {
		got, err := mustRing(t, tc.shards).Selector(tc.set)
		if err != nil || got != tc.want {
			t.Errorf("S=%d Selector(%v) = %q, %v\nwant %q", tc.shards, tc.set, got, err, tc.want)
		}
	}
}

func TestSelectorRefuses(t *testing.T) {
	r := mustRing(t, 8)
	if _, err := r.Selector(nil); !errors.Is(err, sharding.ErrNoShards) {
		t.Errorf("Selector(nil): %v, want ErrNoShards", err)
	}
	if _, err := r.Selector([]int{1, 8}); !errors.Is(err, sharding.ErrInvalidRing) || !strings.Contains(err.Error(), "shard 8") {
		t.Errorf("Selector([1 8]): %v, want ErrInvalidRing naming shard 8", err)
	}
	if _, err := r.Range(-1); !errors.Is(err, sharding.ErrInvalidRing) {
		t.Errorf("Range(-1): %v, want ErrInvalidRing", err)
	}
}

// TestRingProperties checks, over random rings, UIDs and sets of shards, that every
// UID is in exactly one shard and that the selector of a set, read back and matched
// by apimachinery's selector, selects exactly the UIDs of the set's shards.
func TestRingProperties(t *testing.T) {
	for _, seed := range testseed.Seeds(t, 1, 2, 3, 4, 5, 6, 7, 8) {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		for range 20 {
			shards := 1 + rng.IntN(200)
			if rng.IntN(4) == 0 {
				shards = sharding.DefaultShards
			}
			var set []int
			for s := range shards {
				if rng.IntN(3) == 0 {
					set = append(set, s)
				}
			}
			uids := make([]string, 100)
			for i := range uids {
				uids[i] = randomUID(rng)
			}
			checkRing(t, seed, shards, set, uids)
		}
	}
}

// FuzzRing explores the same properties with fuzzed UIDs and sets:
// go test -run '^$' -fuzz FuzzRing -fuzztime 60s ./pkg/k8s/sharding
func FuzzRing(f *testing.F) {
	f.Add("6f1c2c5e-7b1e-4a8e-9a4f-0d2c3e4f5a6b", uint16(64), uint64(0xf0f0))
	f.Add("", uint16(1), uint64(1))
	f.Add("x", uint16(3), uint64(7))
	f.Add("tenant-0", uint16(4095), uint64(math.MaxUint64))
	f.Fuzz(func(t *testing.T, uid string, shards uint16, mask uint64) {
		s := 1 + int(shards)%sharding.MaxShards
		var set []int
		for i := range s {
			if mask>>(i%64)&1 == 1 {
				set = append(set, i)
			}
		}
		checkRing(t, 0, s, set, []string{uid})
	})
}

func checkRing(t *testing.T, seed uint64, shards int, set []int, uids []string) {
	t.Helper()
	r := mustRing(t, shards)
	for _, uid := range uids {
		shard, h := r.ShardOf(uid), sharding.Hash(uid)
		if shard < 0 || shard >= shards {
			t.Fatalf("seed %d S=%d: ShardOf(%q) = %d, out of the ring", seed, shards, uid, shard)
		}
		for _, s := range []int{shard - 1, shard, shard + 1} {
			rg, err := r.Range(s)
			if err != nil {
				continue // no such neighbour
			}
			if rg.Contains(h) != (s == shard) {
				t.Fatalf("seed %d S=%d: uid %q hash %x in shard %d, range of %d is %x..%x", seed, shards, uid, h, shard, s, rg.First, rg.Last)
			}
		}
	}
	sel, err := r.Selector(set)
	if len(set) == 0 {
		if !errors.Is(err, sharding.ErrNoShards) {
			t.Fatalf("seed %d S=%d: Selector of no shards: %q, %v", seed, shards, sel, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("seed %d S=%d: Selector(%v): %v", seed, shards, set, err)
	}
	reqs := parseSelector(t, sel)
	// Adjacent shards are merged: no range ends where the next begins.
	for i := 1; i < len(reqs); i++ {
		if reqs[i-1].End == reqs[i].Start || !apisharding.HexLess(reqs[i-1].End, reqs[i].Start) {
			t.Fatalf("seed %d S=%d: ranges %v and %v of %q are adjacent or out of order", seed, shards, reqs[i-1], reqs[i], sel)
		}
	}
	matcher := apisharding.NewSelector(reqs...)
	for _, uid := range uids {
		obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}}
		got, err := matcher.Matches(obj)
		if err != nil {
			t.Fatal(err)
		}
		if want := slices.Contains(set, r.ShardOf(uid)); got != want {
			t.Fatalf("seed %d S=%d: selector %q matches uid %q (shard %d): %v, want %v", seed, shards, sel, uid, r.ShardOf(uid), got, want)
		}
	}
	// The ranges cover exactly the set's shards: each range's bounds are shard bounds,
	// and the shards between them are all in the set.
	firsts, ends := make([]string, shards), make([]string, shards)
	for s := range shards {
		rg, _ := r.Range(s)
		firsts[s], ends[s] = hex(rg.First), endHex(rg.Last)
	}
	covered := 0
	for _, req := range reqs {
		for s := range shards {
			if apisharding.HexLess(firsts[s], req.Start) || !apisharding.HexLess(firsts[s], req.End) {
				continue
			}
			covered++
			if !slices.Contains(set, s) {
				t.Fatalf("seed %d S=%d: %q covers shard %d, not in %v", seed, shards, sel, s, set)
			}
			if apisharding.HexLess(req.End, ends[s]) {
				t.Fatalf("seed %d S=%d: %q ends inside shard %d", seed, shards, sel, s)
			}
		}
	}
	if want := len(slices.Compact(slices.Sorted(slices.Values(set)))); covered != want {
		t.Fatalf("seed %d S=%d: %q covers %d shards, want %d", seed, shards, sel, covered, want)
	}
}

var termRE = regexp.MustCompile(`^shardRange\(object\.metadata\.uid, '(0x[0-9a-f]{16})', '(0x[0-9a-f]{16}|0x10000000000000000)'\)$`)

// parseSelector reads a selector in the syntax the API server accepts, failing on any
// other form.
func parseSelector(t *testing.T, sel string) []apisharding.ShardRangeRequirement {
	t.Helper()
	var reqs []apisharding.ShardRangeRequirement
	for term := range strings.SplitSeq(sel, " || ") {
		m := termRE.FindStringSubmatch(term)
		if m == nil {
			t.Fatalf("selector term %q is not shardRange(object.metadata.uid, '<16 hex>', '<16 hex or 0x10000000000000000>')", term)
		}
		if !apisharding.HexLess(m[1], m[2]) {
			t.Fatalf("selector term %q: start not below end", term)
		}
		reqs = append(reqs, apisharding.ShardRangeRequirement{Key: sharding.UIDField, Start: m[1], End: m[2]})
	}
	return reqs
}

func hex(h uint64) string { return fmt.Sprintf("0x%016x", h) }

// endHex is the exclusive end after last.
func endHex(last uint64) string {
	if last == math.MaxUint64 {
		return "0x10000000000000000"
	}
	return hex(last + 1)
}

func randomUID(rng *rand.Rand) string {
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func mustRing(t testing.TB, shards int) sharding.Ring {
	t.Helper()
	r, err := sharding.NewRing(shards)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
