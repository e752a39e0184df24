package events

import "errors"

// Errors of the bus. Wrapped errors can be tested with errors.Is.
var (
	// ErrInvalidSubscription is what Subscribe panics with, wrapped, when
	// given arguments no subscription can have (see Subscribe).
	ErrInvalidSubscription = errors.New("events: invalid subscription")
	// ErrStopped says that the bus was stopped (eventstest.Inject returns
	// it, wrapped).
	ErrStopped = errors.New("events: bus stopped")
	// ErrNilEvent says that an event was nil or a typed nil (see IsNil;
	// eventstest.Inject returns it, wrapped).
	ErrNilEvent = errors.New("events: nil event")
)
