package lifecycle

import (
	"errors"
	"fmt"
	"time"
)

// ComponentState is where a component is in its life.
type ComponentState int

// Component states.
const (
	// StateIdle: never started (a leader-only component before its first
	// term).
	StateIdle ComponentState = iota
	// StateRunning: Start is executing and its context is live.
	StateRunning
	// StateStopping: its context was cancelled and the Manager waits for
	// Start to return, within StopTimeout.
	StateStopping
	// StateOverstaying: Start had not returned when StopTimeout passed. The
	// Manager no longer waits, but does not start the component again until
	// it has returned.
	StateOverstaying
	// StateStopped: Start returned cleanly after its context ended.
	StateStopped
	// StateFailed: Start returned an error, returned early or panicked; a
	// leader-only component is started again in its term after RestartDelay.
	StateFailed
)

var stateNames = [...]string{"idle", "running", "stopping", "overstaying", "stopped", "failed"}

func (s ComponentState) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("ComponentState(%d)", int(s))
}

// TermReport describes a term that became ready.
type TermReport struct {
	Term uint64
	// Acquired is when the lease was acquired: the BecameLeaderEvent's
	// timestamp (or, if that is zero, when the Manager received it).
	Acquired time.Time
	// Ready is when the last required state was reported held, or when the
	// term hooks finished if every state was held before.
	Ready time.Time
	// Latency is Ready - Acquired, on the monotonic clock when both carry it.
	Latency time.Duration
}

// TermStopReport describes a term the Manager ended.
type TermStopReport struct {
	Term   uint64
	Reason string // "lost leadership: ...", "superseded by term N", "manager stopping", ...
	// Stopped is when every component of the term had returned, or the
	// StopTimeout passed.
	Stopped time.Time
	// Overstayed names the components still running at Stopped.
	Overstayed []string
}

// Status is a snapshot of the Manager, for /healthz, /readyz and metrics.
type Status struct {
	// Running is true between the start and the return of Run.
	Running bool
	// Leading is true while a term runs; Term is its number (0 otherwise),
	// TermAcquired its BecameLeaderEvent's timestamp and TermReady whether
	// it became ready.
	Leading      bool
	Term         uint64
	TermAcquired time.Time
	TermReady    bool
	// LastReady is the report of the last term that became ready; its Term
	// is 0 when none did yet.
	LastReady TermReport
	// CampaignWaiting is true while the campaigners (AddCampaigner) wait
	// for the all-replica Syncers to sync: the replica does not campaign.
	CampaignWaiting bool
	// Missing names the leader-only components the current term misses:
	// each is still running from an earlier term, or its last run in this
	// one failed and it waits for its restart.
	// MissingSince is when the term started to miss one (zero when it
	// misses none), and SteppingDown is true once the Manager asked to end
	// the term for it (Options.StepDown).
	Missing      []string
	MissingSince time.Time
	SteppingDown bool

	// Counters since NewManager.
	Terms             uint64 // terms started
	ReadyTerms        uint64 // terms that became ready
	Failures          uint64 // component runs that failed
	Overstays         uint64 // component runs that outlived StopTimeout
	SubscribeTimeouts uint64 // leader-only runs that did not signal Subscribed within SubscribeTimeout
	HookFailures      uint64 // term hooks that panicked
	Panics            uint64 // component runs that failed by a panic (recovered by the Manager or reported as ErrPanicked)
	MissingTerms      uint64 // terms that missed a leader-only component at some point
	StepDowns         uint64 // terms the Manager asked to end (Options.StepDown) for a missing or failing component
	// LeadershipDropped counts leadership events lost because the Manager's
	// subscription buffer was full (it should stay 0).
	LeadershipDropped uint64

	// Components lists the all-replica components, then the leader-only
	// ones, each in the order they were added.
	Components []ComponentStatus
}

// ComponentStatus is one component's part of Status.
type ComponentStatus struct {
	Name       string
	LeaderOnly bool
	State      ComponentState
	// Term is the term of the component's current or last run; 0 for an
	// all-replica component or one never started.
	Term uint64
	// LastError is the error of the last failed run, nil if none failed.
	LastError error
	// RequiredState is what the component declared through StateDependent.
	RequiredState []string
	// Subscribed and HeldState are the component's signals in the current
	// term; false and empty when no term runs.
	Subscribed bool
	HeldState  []string
	// Missing is true for a leader-only component the current term misses
	// (see Status.Missing).
	Missing bool

	Starts            uint64 // runs started, a restart in a term counted again
	Failures          uint64
	Overstays         uint64
	SubscribeTimeouts uint64
	Panics            uint64
}

// Component returns the status of the named component.
func (s Status) Component(name string) (ComponentStatus, bool) {
	for _, c := range s.Components {
		if c.Name == name {
			return c, true
		}
	}
	return ComponentStatus{}, false
}

// Healthy returns nil when the replica can do its job, and otherwise an
// error wrapping ErrComponentFailed for each reason: an all-replica
// component that failed (it is not restarted, so the process should be) or
// overstays a stop, and, while leading, a leader-only component the term
// misses (Status.Missing): one whose last run in the current term failed
// (it is restarted after RestartDelay) or one still running from an earlier
// term (it overstayed that term's end and cannot be started in this one). It is
// meant for /healthz and, for a leader, /readyz, together with the
// elector's own health.
func (s Status) Healthy() error {
	var errs []error
	for _, c := range s.Components {
		switch {
		case !c.LeaderOnly && c.State == StateFailed:
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrComponentFailed, c.Name, c.LastError))
		case !c.LeaderOnly && c.State == StateOverstaying:
			errs = append(errs, fmt.Errorf("%w: %s: did not stop in time", ErrComponentFailed, c.Name))
		case c.LeaderOnly && c.Missing && c.State == StateFailed:
			errs = append(errs, fmt.Errorf("%w: %s in term %d: %w", ErrComponentFailed, c.Name, c.Term, c.LastError))
		case c.LeaderOnly && c.Missing:
			errs = append(errs, fmt.Errorf("%w: %s: still running from term %d, missing from term %d", ErrComponentFailed, c.Name, c.Term, s.Term))
		}
	}
	return errors.Join(errs...)
}
