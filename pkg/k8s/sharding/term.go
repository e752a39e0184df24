package sharding

import (
	"context"
	"fmt"

	"github.com/baton-dev/baton/pkg/termctx"
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
// to Callbacks.OnAcquired or one derived from it. ok is false for other contexts.
// Check ctx.Err() before acting for the shard: it reports a term that is over.
func ShardTermFromContext(ctx context.Context) (t ShardTerm, ok bool) {
	if _, ok := termctx.FromContext(ctx); !ok {
		return ShardTerm{}, false
	}
	t, ok = ctx.Value(shardTermKey{}).(ShardTerm)
	return t, ok
}
