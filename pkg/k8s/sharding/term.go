package sharding

import (
	"context"
	"fmt"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// ShardTerm is one term of one shard: the shard, and the term of its Lease (the
// fencing token of writes for objects of that shard).
type ShardTerm struct {
	Shard int
	Term  uint64
}

// String returns "shard <shard> term <term>".
func (t ShardTerm) String() string { return fmt.Sprintf("shard %d term %d", t.Shard, t.Term) }

type shardTermKey struct{}

// withShardTerm returns the term context of a shard's elector carrying t.
func withShardTerm(termCtx context.Context, t ShardTerm) context.Context {
	return context.WithValue(termCtx, shardTermKey{}, t)
}

// ShardTermFromContext returns the shard term ctx belongs to: ctx is the context given
// to Callbacks.OnAcquired or one derived from it. ok is false for other contexts. As
// leaderelection.TermFromContext, it checks the term's renew deadline by the local
// clock first, so once it returned, ctx.Err() reports a term that is over: check it
// before acting for the shard.
func ShardTermFromContext(ctx context.Context) (t ShardTerm, ok bool) {
	if _, ok := leaderelection.TermFromContext(ctx); !ok {
		return ShardTerm{}, false
	}
	t, ok = ctx.Value(shardTermKey{}).(ShardTerm)
	return t, ok
}
