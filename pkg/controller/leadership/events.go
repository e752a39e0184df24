package leadership

import "time"

// Leadership event types, published by the election adapter
// (pkg/controller/leaderelection) and consumed by the controller runtime
// (pkg/controller/lifecycle). The catalog in pkg/controller/events
// re-exports them under the same names.
const (
	EventTypeLeaderElectionStarted = "leadership.election_started"
	EventTypeBecameLeader          = "leadership.became_leader"
	EventTypeLostLeadership        = "leadership.lost"
	EventTypeNewLeaderObserved     = "leadership.new_leader_observed"
)

// LeaderElectionStartedEvent says that this replica began to take part in
// the election of the named lease.
type LeaderElectionStartedEvent struct {
	Identity       string
	LeaseNamespace string
	LeaseName      string
	at             time.Time
}

// NewLeaderElectionStartedEvent returns the event, stamped now.
func NewLeaderElectionStartedEvent(identity, namespace, name string) *LeaderElectionStartedEvent {
	return &LeaderElectionStartedEvent{Identity: identity, LeaseNamespace: namespace, LeaseName: name, at: time.Now()}
}

func (*LeaderElectionStartedEvent) EventType() string { return EventTypeLeaderElectionStarted }

func (e *LeaderElectionStartedEvent) Timestamp() time.Time { return e.at }

// BecameLeaderEvent says that this replica acquired the lease and leads for
// Term, a fencing token that strictly increases across acquisitions.
type BecameLeaderEvent struct {
	Identity string
	Term     uint64
	at       time.Time
}

// NewBecameLeaderEvent returns the event, stamped now.
func NewBecameLeaderEvent(identity string, term uint64) *BecameLeaderEvent {
	return &BecameLeaderEvent{Identity: identity, Term: term, at: time.Now()}
}

func (*BecameLeaderEvent) EventType() string { return EventTypeBecameLeader }

func (e *BecameLeaderEvent) Timestamp() time.Time { return e.at }

// LostLeadershipEvent says that this replica's term ended, and why.
type LostLeadershipEvent struct {
	Identity string
	Term     uint64
	Reason   string
	at       time.Time
}

// NewLostLeadershipEvent returns the event, stamped now.
func NewLostLeadershipEvent(identity string, term uint64, reason string) *LostLeadershipEvent {
	return &LostLeadershipEvent{Identity: identity, Term: term, Reason: reason, at: time.Now()}
}

func (*LostLeadershipEvent) EventType() string { return EventTypeLostLeadership }

func (e *LostLeadershipEvent) Timestamp() time.Time { return e.at }

// NewLeaderObservedEvent says that the lease's holder changed to Identity;
// IsSelf is true when that is this replica.
type NewLeaderObservedEvent struct {
	Identity string
	IsSelf   bool
	at       time.Time
}

// NewNewLeaderObservedEvent returns the event, stamped now.
func NewNewLeaderObservedEvent(identity string, isSelf bool) *NewLeaderObservedEvent {
	return &NewLeaderObservedEvent{Identity: identity, IsSelf: isSelf, at: time.Now()}
}

func (*NewLeaderObservedEvent) EventType() string { return EventTypeNewLeaderObserved }

func (e *NewLeaderObservedEvent) Timestamp() time.Time { return e.at }
