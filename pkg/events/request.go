package events

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Request is an event that asks responders for an answer; its ID ties the
// responses to it.
type Request interface {
	Event
	RequestID() string
}

// Response is an event that answers the Request with the same RequestID.
// Responders publish it on the bus like any other event.
type Response interface {
	Event
	RequestID() string
	Responder() string
}

// RequestOptions say how long Request gathers responses and how many it needs.
type RequestOptions struct {
	// Timeout bounds the wait; zero means the context's deadline alone, which
	// must then exist. Negative is invalid.
	Timeout time.Duration
	// ExpectedResponders names who should answer. Request returns as soon as
	// all of them have; the ones that did not are listed in
	// RequestResult.Missing. Empty means: gather until MinResponses are in
	// (if set) or until the timeout.
	ExpectedResponders []string
	// MinResponses is how many responses make the request a success; fewer
	// at the timeout give ErrTooFewResponses. Zero accepts any number.
	MinResponses int
}

// RequestResult is what a Request gathered. Responses holds the first
// response of each responder, in arrival order.
type RequestResult struct {
	Responses []Response
	Missing   []string // expected responders that did not answer
}

// waiter gathers the responses to one request.
type waiter struct {
	expected map[string]bool
	min      int

	mu        sync.Mutex
	responses []Response
	from      map[string]bool
	done      chan struct{} // closed by offer once the request is satisfied
	closed    bool
}

// Request publishes req and gathers the responses published for it until
// every expected responder answered, MinResponses arrived (with no expected
// list), the timeout passed or ctx ended. It returns the responses gathered
// in every case; the error is nil when enough arrived, wraps
// ErrTooFewResponses when the wait ended with fewer than MinResponses, and is
// ctx's error if ctx ended first with too few.
func (b *EventBus) Request(ctx context.Context, req Request, opts RequestOptions) (RequestResult, error) {
	if IsNil(req) {
		return RequestResult{}, ErrNilEvent
	}
	if err := opts.validate(ctx); err != nil {
		return RequestResult{}, err
	}
	switch b.state.Load() {
	case stateNew:
		return RequestResult{}, ErrNotStarted
	case stateStopped:
		return RequestResult{}, ErrStopped
	}
	id := req.RequestID()
	w := &waiter{min: opts.MinResponses, from: map[string]bool{}, done: make(chan struct{})}
	if len(opts.ExpectedResponders) > 0 {
		w.expected = make(map[string]bool, len(opts.ExpectedResponders))
		for _, r := range opts.ExpectedResponders {
			w.expected[r] = true
		}
	}
	b.waitersMu.Lock()
	if _, dup := b.waiters[id]; dup {
		b.waitersMu.Unlock()
		return RequestResult{}, fmt.Errorf("%w: request id %q already in flight", ErrInvalidRequestOptions, id)
	}
	b.waiters[id] = w
	b.waitersMu.Unlock()
	b.requests.Add(1)
	defer func() {
		b.requests.Add(-1)
		b.waitersMu.Lock()
		delete(b.waiters, id)
		b.waitersMu.Unlock()
	}()

	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	b.Publish(req)

	var ctxErr error
	select {
	case <-w.done:
	case <-ctx.Done():
		ctxErr = ctx.Err()
	}

	w.mu.Lock()
	res := RequestResult{Responses: slices.Clone(w.responses)}
	for _, r := range opts.ExpectedResponders {
		if !w.from[r] {
			res.Missing = append(res.Missing, r)
		}
	}
	w.mu.Unlock()

	if len(res.Responses) >= opts.MinResponses {
		return res, nil
	}
	if ctxErr == context.DeadlineExceeded && opts.Timeout > 0 {
		return res, fmt.Errorf("%w: %d of %d within %s", ErrTooFewResponses, len(res.Responses), opts.MinResponses, opts.Timeout)
	}
	return res, fmt.Errorf("%w: %d of %d: %w", ErrTooFewResponses, len(res.Responses), opts.MinResponses, ctxErr)
}

func (o RequestOptions) validate(ctx context.Context) error {
	switch {
	case o.Timeout < 0:
		return fmt.Errorf("%w: timeout %s is negative", ErrInvalidRequestOptions, o.Timeout)
	case o.Timeout == 0:
		if _, ok := ctx.Deadline(); !ok {
			return fmt.Errorf("%w: timeout is zero and the context has no deadline", ErrInvalidRequestOptions)
		}
	}
	if o.MinResponses < 0 {
		return fmt.Errorf("%w: min responses %d is negative", ErrInvalidRequestOptions, o.MinResponses)
	}
	if n := len(o.ExpectedResponders); n > 0 && o.MinResponses > n {
		return fmt.Errorf("%w: min responses %d exceeds the %d expected responders", ErrInvalidRequestOptions, o.MinResponses, n)
	}
	return nil
}

// offerResponse hands e to the request it answers, if one waits.
func (b *EventBus) offerResponse(e Event) {
	r, ok := e.(Response)
	if !ok || IsNil(r) {
		return
	}
	b.waitersMu.Lock()
	w := b.waiters[r.RequestID()]
	b.waitersMu.Unlock()
	if w != nil {
		w.offer(r)
	}
}

func (w *waiter) offer(r Response) {
	who := r.Responder()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.from[who] {
		return
	}
	w.from[who] = true
	w.responses = append(w.responses, r)
	if w.satisfiedLocked() {
		w.closed = true
		close(w.done)
	}
}

func (w *waiter) satisfiedLocked() bool {
	if w.expected != nil {
		for r := range w.expected {
			if !w.from[r] {
				return false
			}
		}
		return true
	}
	return w.min > 0 && len(w.responses) >= w.min
}
