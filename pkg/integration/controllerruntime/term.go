package controllerruntime

import (
	"context"
	"errors"
	"strconv"

	"github.com/baton-dev/baton/pkg/termctx"
)

// TermEnded returns nil while the term of ctx runs, an error wrapping ErrTermEnded and
// the cause (context.Cause: lifecycle.ErrLeadershipLost, ErrSteppedDown or
// ErrManagerStopped) once it ended, checked by the elector's own clock at the call, and
// ErrNoTerm for a context of no term. The fenced client checks it before every write.
func TermEnded(ctx context.Context) error {
	_, err := termOf(ctx)
	return err
}

// termOf returns the term of ctx (termctx.Get), or TermEnded's error, with one lookup.
// The ref has no Lease yet: the fenced client binds it (fencedClient.begin).
func termOf(ctx context.Context) (*termRef, error) {
	t, ok := termctx.Get(ctx)
	if !ok {
		return nil, ErrNoTerm
	}
	ref := &termRef{term: t.Number, t: t, ctx: ctx}
	if err := ref.ended(); err != nil {
		return nil, err
	}
	return ref, nil
}

// ended returns nil while ref's term runs, and TermEnded's error once it ended
// (termctx.Err: by the clock of the context the term was stamped on).
func (ref *termRef) ended() error {
	err := termctx.Err(ref.ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, termctx.ErrNoTerm):
		return ErrNoTerm
	}
	return &termEndedError{term: ref.term, cause: err}
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
