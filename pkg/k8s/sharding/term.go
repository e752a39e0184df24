package sharding

import (
	"context"
	"fmt"

	"github.com/baton-dev/baton/pkg/termctx"
)

// ShardTerm is one term of one shard: the shard, and the term of its Lease (the
// fencing token of writes for objects of that shard). termctx.Get on a shard's term
// context gives the whole term (the Lease, the token); ShardTerm is its short name in
// this package's callbacks and logs.
type ShardTerm struct {
	Shard int
	Term  uint64
}

// String returns "shard <shard> term <term>".
func (t ShardTerm) String() string { return fmt.Sprintf("shard %d term %d", t.Shard, t.Term) }

// ShardTermOf returns the shard term of t, the term of a shard's context, as
// ShardTermOf(termctx.Get(ctx)) does: ok is false when the context carries no term
// (ok false) or a term of no ring (a single leader's).
func ShardTermOf(t termctx.Term, ok bool) (ShardTerm, bool) {
	if !ok || !t.Sharded() {
		return ShardTerm{}, false
	}
	return ShardTerm{Shard: t.Shard, Term: t.Number}, true
}

// withShard returns the term context of shard's elector, termCtx, carrying its term
// as a shard of a ring of shards: termctx.Get(ctx).Shard gives the shard.
func withShard(termCtx context.Context, shard, shards int) context.Context {
	t, _ := termctx.Get(termCtx)
	t.Shard, t.Shards = shard, shards
	return termctx.With(termCtx, t)
}
