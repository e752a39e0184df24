package sharding

import "testing"

// ShardOf's arithmetic agrees with the ranges at every boundary: the first hash of
// shard i is in shard i, the one before it in shard i-1.
func TestShardOfHashAtBoundaries(t *testing.T) {
	for s := 1; s <= MaxShards; s++ {
		r := Ring{shards: s}
		for i := range s {
			first := r.start(i)
			if got := r.shardOfHash(first); got != i {
				t.Fatalf("S=%d: first hash %x of shard %d is in shard %d", s, first, i, got)
			}
			if i > 0 {
				if got := r.shardOfHash(first - 1); got != i-1 {
					t.Fatalf("S=%d: hash %x before shard %d is in shard %d, want %d", s, first-1, i, got, i-1)
				}
			}
		}
		if got := r.shardOfHash(^uint64(0)); got != s-1 {
			t.Fatalf("S=%d: the last hash is in shard %d", s, got)
		}
	}
}
