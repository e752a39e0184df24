package termctx

import (
	"context"
	"errors"
	"time"
)

// ErrNoTerm is returned by Err for a context no term was stamped on.
var ErrNoTerm = errors.New("termctx: no term in the context")

// Term is one term of a Lease: which Lease, its number, and the token that names it
// on the Lease. A single leader's term is the one-shard case of a ring's shard term:
// Shards is 0 and Shard is 0.
type Term struct {
	// Lease is the Lease the term holds; zero for a term of no Lease (an election
	// disabled, or a runtime that numbers terms of its own).
	Lease Lease
	// Shard is the shard of a ring whose Lease this is; 0 outside a ring.
	Shard int
	// Shards is the number of shards of that ring; 0 outside a ring (a single leader).
	Shards int
	// Number is the term number: it grows with every term of the Lease, and is the
	// fencing token writes compare in process.
	Number uint64
	// Token names the term on the Lease itself, for a fence the API server applies;
	// zero when whoever stamped the term did not know it.
	Token Token
	// LeaseUID is the Lease object's UID (metadata.uid) as the term's acquisition
	// found it, for what refers to the Lease itself (an Event regarding it); "" when
	// whoever stamped the term did not know it.
	LeaseUID string
}

// Lease names a coordination.k8s.io/v1 Lease.
type Lease struct {
	Namespace, Name string
}

// Token is what names a term on its Lease: the holder and the acquireTime the term's
// acquiring write set. Every renew keeps both until the next acquisition, so a fence
// that reads the Lease can compare them; the term number (the resourceVersion of the
// acquiring write) is not on the Lease to compare.
type Token struct {
	Holder   string
	Acquired time.Time
}

// Sharded reports whether t is a shard's term (of a ring), not a single leader's.
func (t Term) Sharded() bool { return t.Shards > 0 }

// key is the context key of the term.
type key struct{}

// stamp is what a context carries: the term, and the context it was stamped on,
// whose end is the term's end (Err).
type stamp struct {
	term   Term
	origin context.Context
}

// With returns a copy of parent that carries t. The term ends when parent does (Err).
// A term stamped later, on a context derived from it, shadows this one.
func With(parent context.Context, t Term) context.Context {
	return context.WithValue(parent, key{}, &stamp{term: t, origin: parent})
}

// Get returns the term ctx carries: the term of the leadership context ctx is, or
// derives from. ok is false for a nil context and for any context no term was
// stamped on. This is the one accessor of a term; FromContext is its number.
func Get(ctx context.Context) (t Term, ok bool) {
	s := lookup(ctx)
	if s == nil {
		return Term{}, false
	}
	return s.term, true
}

// Err returns nil while the term ctx carries runs, and once it ended the cause of the
// context the term was stamped on (context.Cause), checked at the call: that context
// may report the end by a clock of its own (an elector's renew deadline) before a
// context derived from it, such as ctx, was cancelled. It returns ErrNoTerm for a
// context no term was stamped on.
func Err(ctx context.Context) error {
	s := lookup(ctx)
	if s == nil {
		return ErrNoTerm
	}
	if s.origin.Err() == nil {
		return nil
	}
	return context.Cause(s.origin)
}

func lookup(ctx context.Context) *stamp {
	if ctx == nil {
		return nil
	}
	s, _ := ctx.Value(key{}).(*stamp)
	return s
}

// NewContext returns a copy of parent that carries term number n: With of a Term of
// that number alone.
func NewContext(parent context.Context, n uint64) context.Context {
	return With(parent, Term{Number: n})
}

// FromContext returns the number of the term ctx carries (Get).
func FromContext(ctx context.Context) (n uint64, ok bool) {
	t, ok := Get(ctx)
	return t.Number, ok
}

// Follow wraps ctx (one the caller cancels, from context.WithCancelCause) so that it
// answers for src as well: its Done and Err first ask src, and when src has ended
// while ctx has not, call end, which must cancel ctx (with whatever cause the caller
// chooses), before they answer. Why: an elector's term context reports its end in Err as soon
// as its renew deadline passed by the local clock, before anything closed its Done (a
// process resumed after a pause past the deadline); a context derived from it by
// context.WithCancel alone would not ask it, and would run on. Err is never non-nil
// while Done is open. The caller still arranges that src's Done closing ends ctx
// (context.AfterFunc) for goroutines that only wait on Done.
func Follow(ctx, src context.Context, end func()) context.Context {
	return &following{Context: ctx, src: src, end: end}
}

// following is Follow's context.
type following struct {
	context.Context
	src context.Context
	end func()
}

func (c *following) check() {
	if c.Context.Err() == nil && c.src.Err() != nil {
		c.end()
	}
}

func (c *following) Done() <-chan struct{} {
	c.check()
	return c.Context.Done()
}

func (c *following) Err() error {
	c.check()
	return c.Context.Err()
}
