package controllerruntime

import (
	"context"
	"strconv"

	"github.com/baton-dev/baton/pkg/termctx"
)

// termRefKey is the context key of the term reference.
type termRefKey struct{}

// withTermRef records ctx, the context the runtime gave a leader-only run, in ctx,
// with lease, the Lease whose term it is (nil: none the fence may read).
func withTermRef(ctx context.Context, lease *leaseReader) context.Context {
	term, ok := termctx.FromContext(ctx)
	if !ok {
		return ctx
	}
	return context.WithValue(ctx, termRefKey{}, &termRef{term: term, ctx: ctx, lease: lease})
}

func termRefFrom(ctx context.Context) *termRef {
	if ctx == nil {
		return nil
	}
	ref, _ := ctx.Value(termRefKey{}).(*termRef)
	return ref
}

// TermEnded returns nil while the term of ctx runs, an error wrapping ErrTermEnded and
// the cause (context.Cause: lifecycle.ErrLeadershipLost, ErrSteppedDown or
// ErrManagerStopped) once it ended, checked by the elector's own clock at the call, and
// ErrNoTerm for a context of no term. The fenced client checks it before every write.
func TermEnded(ctx context.Context) error {
	_, err := termOf(ctx)
	return err
}

// termOf returns the term of ctx, or TermEnded's error, with one lookup.
func termOf(ctx context.Context) (*termRef, error) {
	ref := termRefFrom(ctx)
	if ref == nil {
		return nil, ErrNoTerm
	}
	if ref.ctx.Err() != nil {
		return nil, &termEndedError{term: ref.term, cause: context.Cause(ref.ctx)}
	}
	return ref, nil
}

// termEndedError wraps ErrTermEnded and the cause of the end.
type termEndedError struct {
	term  uint64
	cause error
}

func (e *termEndedError) Error() string {
	msg := "controllerruntime: term " + uitoa(e.term) + " ended"
	if e.cause != nil {
		msg += ": " + e.cause.Error()
	}
	return msg
}

func (e *termEndedError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrTermEnded}
	}
	return []error{ErrTermEnded, e.cause}
}

func uitoa(v uint64) string { return strconv.FormatUint(v, 10) }
