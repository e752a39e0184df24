package lifecycle

import "time"

// Lifecycle event types, published by the Manager. The catalog in
// pkg/controller/events re-exports them under the same names. A term's
// own reports go to Options.OnTermReady and Options.OnTermStopped.
const (
	EventTypeComponentFailed     = "lifecycle.component_failed"
	EventTypeComponentOverstayed = "lifecycle.component_overstayed"
)

// Overstay phases, for ComponentOverstayedEvent.Phase.
const (
	// OverstaySubscribe: a leader-only component did not signal that its
	// subscriptions exist within the runtime's subscribe timeout, so the
	// term's replays went out without waiting for it.
	OverstaySubscribe = "subscribe"
	// OverstayStop: a component did not return within the runtime's stop
	// timeout after its context was cancelled.
	OverstayStop = "stop"
)

// ComponentFailedEvent says that a component's Start returned an error
// other than a clean, context-cancelled stop. Term is the term the run
// belonged to, 0 for an all-replica component.
type ComponentFailedEvent struct {
	Component  string
	LeaderOnly bool
	Term       uint64
	Err        error
	at         time.Time
}

// NewComponentFailedEvent returns the event, stamped now.
func NewComponentFailedEvent(component string, leaderOnly bool, term uint64, err error) *ComponentFailedEvent {
	return &ComponentFailedEvent{Component: component, LeaderOnly: leaderOnly, Term: term, Err: err, at: time.Now()}
}

func (*ComponentFailedEvent) EventType() string { return EventTypeComponentFailed }

func (e *ComponentFailedEvent) Timestamp() time.Time { return e.at }

// ComponentOverstayedEvent says that a component did not do in time what
// the runtime waited for; Phase (OverstaySubscribe or OverstayStop) says
// what, Waited how long the runtime waited. Term is 0 for an all-replica
// component.
type ComponentOverstayedEvent struct {
	Component string
	Term      uint64
	Phase     string
	Waited    time.Duration
	at        time.Time
}

// NewComponentOverstayedEvent returns the event, stamped now.
func NewComponentOverstayedEvent(component string, term uint64, phase string, waited time.Duration) *ComponentOverstayedEvent {
	return &ComponentOverstayedEvent{Component: component, Term: term, Phase: phase, Waited: waited, at: time.Now()}
}

func (*ComponentOverstayedEvent) EventType() string { return EventTypeComponentOverstayed }

func (e *ComponentOverstayedEvent) Timestamp() time.Time { return e.at }
