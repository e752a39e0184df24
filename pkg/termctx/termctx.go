package termctx

import "context"

// key is the context key of the term.
type key struct{}

// Carrier is a context value that carries a term: what a context's Value
// returns for the term key (see IsKey). A context type of its own that knows
// its term (the elector's term context) answers the lookup itself, instead
// of wrapping a parent with NewContext, which saves an allocation per term.
type Carrier interface {
	// Term returns the term carried.
	Term() uint64
}

// IsKey reports whether k is the key FromContext looks the term up with. A
// context type that carries a term itself returns a Carrier from Value for
// it and asks its parent for any other key.
func IsKey(k any) bool {
	_, ok := k.(key)
	return ok
}

// stamped is a context carrying a term. It is what context.WithValue would
// make, in one allocation rather than two (WithValue boxes the uint64 as
// well). Done, Err and Deadline are the parent's, so contexts derived from
// it still register with the parent's cancellation directly.
type stamped struct {
	context.Context
	n uint64
}

// Term returns the term stamped: a stamped context is its own Carrier.
func (c *stamped) Term() uint64 { return c.n }

// Value returns the stamped context itself for key{} (FromContext reads
// the term from it without boxing) and asks the parent for any other key.
func (c *stamped) Value(k any) any {
	if IsKey(k) {
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
	c, ok := ctx.Value(key{}).(Carrier)
	if !ok {
		return 0, false
	}
	return c.Term(), true
}
