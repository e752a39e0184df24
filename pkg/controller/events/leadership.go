package events

import "github.com/baton-dev/baton/pkg/controller/leadership"

// Leadership event types. The events are defined in the core, in
// pkg/controller/leadership, so that the runtime does not depend on this
// catalog; the names here are aliases of those.
const (
	EventTypeLeaderElectionStarted = leadership.EventTypeLeaderElectionStarted
	EventTypeBecameLeader          = leadership.EventTypeBecameLeader
	EventTypeLostLeadership        = leadership.EventTypeLostLeadership
	EventTypeNewLeaderObserved     = leadership.EventTypeNewLeaderObserved
)

type (
	// LeaderElectionStartedEvent is leadership.LeaderElectionStartedEvent.
	LeaderElectionStartedEvent = leadership.LeaderElectionStartedEvent
	// BecameLeaderEvent is leadership.BecameLeaderEvent.
	BecameLeaderEvent = leadership.BecameLeaderEvent
	// LostLeadershipEvent is leadership.LostLeadershipEvent.
	LostLeadershipEvent = leadership.LostLeadershipEvent
	// NewLeaderObservedEvent is leadership.NewLeaderObservedEvent.
	NewLeaderObservedEvent = leadership.NewLeaderObservedEvent
)

// NewLeaderElectionStartedEvent calls leadership.NewLeaderElectionStartedEvent.
func NewLeaderElectionStartedEvent(identity, namespace, name string) *LeaderElectionStartedEvent {
	return leadership.NewLeaderElectionStartedEvent(identity, namespace, name)
}

// NewBecameLeaderEvent calls leadership.NewBecameLeaderEvent.
func NewBecameLeaderEvent(identity string, term uint64) *BecameLeaderEvent {
	return leadership.NewBecameLeaderEvent(identity, term)
}

// NewLostLeadershipEvent calls leadership.NewLostLeadershipEvent.
func NewLostLeadershipEvent(identity string, term uint64, reason string) *LostLeadershipEvent {
	return leadership.NewLostLeadershipEvent(identity, term, reason)
}

// NewNewLeaderObservedEvent calls leadership.NewNewLeaderObservedEvent.
func NewNewLeaderObservedEvent(identity string, isSelf bool) *NewLeaderObservedEvent {
	return leadership.NewNewLeaderObservedEvent(identity, isSelf)
}
