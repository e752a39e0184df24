package events

import (
	"time"

	"github.com/baton-dev/baton/pkg/controller/lifecycle"
)

// Lifecycle event types. The events are defined in the core, in
// pkg/controller/lifecycle, which publishes them; the names here are aliases
// of those.
const (
	EventTypeComponentFailed     = lifecycle.EventTypeComponentFailed
	EventTypeComponentOverstayed = lifecycle.EventTypeComponentOverstayed
)

// Overstay phases, for ComponentOverstayedEvent.Phase.
const (
	OverstaySubscribe = lifecycle.OverstaySubscribe
	OverstayStop      = lifecycle.OverstayStop
)

type (
	// ComponentFailedEvent is lifecycle.ComponentFailedEvent.
	ComponentFailedEvent = lifecycle.ComponentFailedEvent
	// ComponentOverstayedEvent is lifecycle.ComponentOverstayedEvent.
	ComponentOverstayedEvent = lifecycle.ComponentOverstayedEvent
)

// NewComponentFailedEvent calls lifecycle.NewComponentFailedEvent.
func NewComponentFailedEvent(component string, leaderOnly bool, term uint64, err error) *ComponentFailedEvent {
	return lifecycle.NewComponentFailedEvent(component, leaderOnly, term, err)
}

// NewComponentOverstayedEvent calls lifecycle.NewComponentOverstayedEvent.
func NewComponentOverstayedEvent(component string, term uint64, phase string, waited time.Duration) *ComponentOverstayedEvent {
	return lifecycle.NewComponentOverstayedEvent(component, term, phase, waited)
}
