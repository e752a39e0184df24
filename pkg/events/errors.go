package events

import "errors"

// Errors returned by the bus. Wrapped errors can be tested with errors.Is.
var (
	// ErrNotStarted is returned by Request before Start.
	ErrNotStarted = errors.New("events: bus not started")
	// ErrStopped is returned by Request after Stop.
	ErrStopped = errors.New("events: bus stopped")
	// ErrNilEvent is returned by Request for a nil or typed-nil request.
	ErrNilEvent = errors.New("events: nil event")
	// ErrInvalidRequestOptions is returned by Request for options that cannot
	// be satisfied, such as a negative timeout.
	ErrInvalidRequestOptions = errors.New("events: invalid request options")
	// ErrInvalidSubscription is what Subscribe panics with, wrapped, when
	// given arguments no subscription can have (see Subscribe).
	ErrInvalidSubscription = errors.New("events: invalid subscription")
	// ErrTooFewResponses is returned by Request when fewer than
	// RequestOptions.MinResponses responses arrived in time.
	ErrTooFewResponses = errors.New("events: too few responses")
)
