package events

import "time"

// Deployment event types, published by the leader-only DeploymentScheduler
// (pkg/controller/deploymentscheduler).
const (
	EventTypeDeploymentScheduled = "deployment.scheduled"
)

// DeploymentScheduledEvent says that the leader of Term deployed the
// configuration of ConfigVersion to the pods of PodGeneration. Sequence
// numbers the deployments of the term from 1; Coalesced counts the input
// changes the deployment covers (more than one when changes arrived while
// the rate limit held it back). It is not state: it is never replayed.
type DeploymentScheduledEvent struct {
	Term          uint64
	Sequence      uint64
	ConfigVersion string
	PodGeneration uint64
	Pods          int // pods in the set deployed to
	ReadyPods     int
	Coalesced     int
	at            time.Time
}

// NewDeploymentScheduledEvent returns the event, stamped now.
func NewDeploymentScheduledEvent(term, sequence uint64, configVersion string, podGeneration uint64, pods, readyPods, coalesced int) *DeploymentScheduledEvent {
	return &DeploymentScheduledEvent{
		Term: term, Sequence: sequence, ConfigVersion: configVersion, PodGeneration: podGeneration,
		Pods: pods, ReadyPods: readyPods, Coalesced: coalesced, at: time.Now(),
	}
}

func (*DeploymentScheduledEvent) EventType() string { return EventTypeDeploymentScheduled }

func (e *DeploymentScheduledEvent) Timestamp() time.Time { return e.at }
