package sharded

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/termctx"
)

func formatTerm(t uint64) string { return strconv.FormatUint(t, 10) }

// span is one shard term as its owner believed in it: from OnAcquired to the end of
// its context (exact in a synctest bubble, where time stands still while a goroutine
// can run). end is zero while the term is open.
type span struct {
	shard      int
	who        string
	term       uint64
	start, end time.Time
	cold       bool // acquired by a create sent before its elector had seen the Lease
}

func (s span) endOr(t time.Time) time.Time {
	if s.end.IsZero() {
		return t
	}
	return s.end
}

// regOp is one write to the fenced register of an object: sent (call) by who with the
// stamp of its shard term, answered at ret.
type regOp struct {
	obj       int
	who       string
	term      uint64
	call, ret time.Time
	accepted  bool
	answered  bool // false: the write failed before the register saw it (cut, crash)
}

// recorder keeps the spans and the register writes of one history. Safe for
// concurrent use.
type recorder struct {
	// mu guards the fields below.
	mu    sync.Mutex
	spans []*span
	ops   []regOp
}

func (r *recorder) begin(s *span) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, s)
}

// end ends s now, or when its replica's process died (died, if not zero) if that
// was earlier: a dead process's work is over whenever its term context ends.
func (r *recorder) end(s *span, died time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.end = time.Now()
	if !died.IsZero() && died.Before(s.end) {
		s.end = later(died, s.start)
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (r *recorder) op(o regOp) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, o)
}

// snapshot returns copies of the spans and ops so far.
func (r *recorder) snapshot() ([]span, []regOp) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]span, len(r.spans))
	for i, s := range r.spans {
		out[i] = *s
	}
	return out, append([]regOp(nil), r.ops...)
}

// register is the fenced register of every object: a compare-and-swap per object that
// accepts a write whose stamp is at least the highest stamp it accepted, as a store
// that compares terms does. Safe for concurrent use.
type register struct {
	// mu guards top.
	mu  sync.Mutex
	top map[int]uint64
}

func (g *register) write(obj int, stamp uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if stamp < g.top[obj] {
		return false
	}
	g.top[obj] = stamp
	return true
}

// objectsPerShard is how many objects of each shard the owner writes.
const objectsPerShard = 2

// work is a replica's shard work, its Callbacks.OnAcquired: it records the term (its
// end from the instant the term context ends, whatever the work is doing then) and
// writes the shard's objects, each stamped with the shard term, every half to one
// and a half period until the term ends. A write checks the term before it is sent,
// as a fenced client does; a pause may hold it after the check, so that it reaches the
// register late. Each write takes a seeded latency each way (netLatency).
func work(rec *recorder, reg *register, n *node, period time.Duration, seed uint64) func(ctx context.Context) {
	return func(ctx context.Context) {
		st, ok := sharding.ShardTermOf(termctx.Get(ctx))
		if !ok {
			panic("OnAcquired's context carries no shard term")
		}
		// The writes' timing and objects are drawn from the seed, the replica, the
		// shard and the term, so that a history replays.
		rng := rand.New(rand.NewPCG(seed^st.Term*0x9e3779b97f4a7c15, replicaNumber(n.id)<<16|uint64(st.Shard)))
		n.mu.Lock()
		l := n.leases[st.Shard]
		n.mu.Unlock()
		s := &span{shard: st.Shard, who: n.id, term: st.Term, start: time.Now(), cold: l.coldStart(st.Term)}
		rec.begin(s)
		context.AfterFunc(ctx, func() { rec.end(s, n.deathTime()) })
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(period/2 + time.Duration(rng.Int64N(int64(period)))):
			}
			if ctx.Err() != nil {
				return
			}
			o := regOp{obj: st.Shard*objectsPerShard + rng.IntN(objectsPerShard), who: n.id, term: st.Term, call: time.Now()}
			tr := trip{req: time.Duration(rng.Int64N(int64(netLatency))), reply: time.Duration(rng.Int64N(int64(netLatency)))}
			n.holdWhilePaused(context.Background()) // checked, then paused: sent after the pause
			wctx, cancel := context.WithTimeout(context.Background(), period)
			if err := n.enter(wctx, tr); err == nil {
				o.accepted, o.answered = reg.write(o.obj, o.term), true
				n.holdWhilePaused(context.Background())
				time.Sleep(tr.reply)
			}
			cancel()
			o.ret = time.Now()
			rec.op(o)
		}
	}
}
