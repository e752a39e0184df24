package termctx

import "context"

// key is the context key of the term.
type key struct{}

// stamped is a context carrying a term. It is what context.WithValue would
// make, in one allocation rather than two (WithValue boxes the uint64 as
// well), because a term is stamped at least twice per term on the path to
// the term's start. Done, Err and Deadline are the parent's, so contexts
// derived from it still register with the parent's cancellation directly.
type stamped struct {
	context.Context
	n uint64
}

// Value returns the stamped context itself for key{} (FromContext reads
// the term from it without boxing) and asks the parent for any other key.
func (c *stamped) Value(k any) any {
	if _, ok := k.(key); ok {
		return c
	}
	return c.Context.Value(k)
}

// NewContext returns a copy of parent that carries term n. A term stamped
// later, on a context derived from it, shadows this one.
func NewContext(parent context.Context, n uint64) context.Context {
	return &stamped{Context: parent, n: n}
}

// FromContext returns the term ctx carries: the term of the leadership
// context ctx is, or derives from. ok is false for a nil context and for
// any context no term was stamped on.
func FromContext(ctx context.Context) (n uint64, ok bool) {
	if ctx == nil {
		return 0, false
	}
	s, ok := ctx.Value(key{}).(*stamped)
	if !ok {
		return 0, false
	}
	return s.n, true
}
