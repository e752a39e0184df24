package termctx

import "context"

// key is the context key of the term.
type key struct{}

// NewContext returns a copy of parent that carries term n. A term stamped
// later, on a context derived from it, shadows this one.
func NewContext(parent context.Context, n uint64) context.Context {
	return context.WithValue(parent, key{}, n)
}

// FromContext returns the term ctx carries: the term of the leadership
// context ctx is, or derives from. ok is false for a nil context and for
// any context no term was stamped on.
func FromContext(ctx context.Context) (n uint64, ok bool) {
	if ctx == nil {
		return 0, false
	}
	n, ok = ctx.Value(key{}).(uint64)
	return n, ok
}
