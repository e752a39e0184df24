package termctx

import "context"

// key is the context key of the term.
type key struct{}

// Carrier is a context value that carries a term: what a context's Value
// returns for the term key (see IsKey). NewContext stores one; a context
// type of its own that knows its term may answer the lookup itself.
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

// term is the Carrier NewContext stores.
type term uint64

func (t term) Term() uint64 { return uint64(t) }

// NewContext returns a copy of parent that carries term n. A term stamped
// later, on a context derived from it, shadows this one.
func NewContext(parent context.Context, n uint64) context.Context {
	return context.WithValue(parent, key{}, term(n))
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
