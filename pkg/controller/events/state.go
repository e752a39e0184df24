package events

import (
	"time"

	"github.com/baton-dev/baton/pkg/controller/config"
)

// State and trigger event types.
const (
	EventTypeConfigValidated         = "config.validated"
	EventTypeConfigInvalid           = "config.invalid"
	EventTypeHAProxyPodsDiscovered   = "pods.discovered"
	EventTypeReconciliationTriggered = "reconciliation.triggered"
	EventTypeTemplateRendered        = "template.rendered"
	EventTypeValidationFailed        = "validation.failed"
)

// ConfigValidatedEvent carries a configuration that passed validation.
// Version identifies its content (a hash, or the source's resourceVersion).
// It is state: the all-replica ConfigChangeHandler caches the last one and
// replays it to a new leader.
type ConfigValidatedEvent struct {
	Config  *config.Config
	Version string
	Source  string // where it was read from, for logs
	at      time.Time
}

// NewConfigValidatedEvent returns the event, stamped now.
func NewConfigValidatedEvent(cfg *config.Config, version, source string) *ConfigValidatedEvent {
	return &ConfigValidatedEvent{Config: cfg, Version: version, Source: source, at: time.Now()}
}

func (*ConfigValidatedEvent) EventType() string { return EventTypeConfigValidated }

func (e *ConfigValidatedEvent) Timestamp() time.Time { return e.at }

// ConfigInvalidEvent says that a configuration was refused; each error names
// the offending field. The last valid configuration stays in force.
type ConfigInvalidEvent struct {
	Version string
	Source  string
	Errors  []error
	at      time.Time
}

// NewConfigInvalidEvent returns the event, stamped now.
func NewConfigInvalidEvent(version, source string, errs []error) *ConfigInvalidEvent {
	return &ConfigInvalidEvent{Version: version, Source: source, Errors: errs, at: time.Now()}
}

func (*ConfigInvalidEvent) EventType() string { return EventTypeConfigInvalid }

func (e *ConfigInvalidEvent) Timestamp() time.Time { return e.at }

// HAProxyPodsDiscoveredEvent carries the full current set of target pods.
// Generation is the version of the source the set was read at (in cluster
// mode a resourceVersion of the pod list): the same on every replica, and
// increasing across replicas and terms, so that a new leader never publishes
// a generation below its predecessor's. It is state:
// the all-replica Discovery caches the last one and replays it.
type HAProxyPodsDiscoveredEvent struct {
	Pods       []config.Pod
	Generation uint64
	at         time.Time
}

// NewHAProxyPodsDiscoveredEvent returns the event, stamped now.
func NewHAProxyPodsDiscoveredEvent(pods []config.Pod, generation uint64) *HAProxyPodsDiscoveredEvent {
	return &HAProxyPodsDiscoveredEvent{Pods: pods, Generation: generation, at: time.Now()}
}

func (*HAProxyPodsDiscoveredEvent) EventType() string { return EventTypeHAProxyPodsDiscovered }

func (e *HAProxyPodsDiscoveredEvent) Timestamp() time.Time { return e.at }

// ReconciliationTriggeredEvent asks the leader to render and validate from
// the current inputs. It is never replayed: a new leader gets a fresh one.
type ReconciliationTriggeredEvent struct {
	Reason string
	at     time.Time
}

// NewReconciliationTriggeredEvent returns the event, stamped now.
func NewReconciliationTriggeredEvent(reason string) *ReconciliationTriggeredEvent {
	return &ReconciliationTriggeredEvent{Reason: reason, at: time.Now()}
}

func (*ReconciliationTriggeredEvent) EventType() string { return EventTypeReconciliationTriggered }

func (e *ReconciliationTriggeredEvent) Timestamp() time.Time { return e.at }

// TemplateRenderedEvent carries a rendered and validated output, with the
// versions of the inputs it was rendered from and the term of the leader
// that rendered it.
type TemplateRenderedEvent struct {
	Output        string
	ConfigVersion string
	PodGeneration uint64
	Term          uint64
	at            time.Time
}

// NewTemplateRenderedEvent returns the event, stamped now.
func NewTemplateRenderedEvent(output, configVersion string, podGeneration, term uint64) *TemplateRenderedEvent {
	return &TemplateRenderedEvent{Output: output, ConfigVersion: configVersion, PodGeneration: podGeneration, Term: term, at: time.Now()}
}

func (*TemplateRenderedEvent) EventType() string { return EventTypeTemplateRendered }

func (e *TemplateRenderedEvent) Timestamp() time.Time { return e.at }

// ValidationFailedEvent says that a rendered output failed validation; each
// error names its line. The last valid output stays in force.
type ValidationFailedEvent struct {
	Errors        []error
	ConfigVersion string
	PodGeneration uint64
	Term          uint64
	at            time.Time
}

// NewValidationFailedEvent returns the event, stamped now.
func NewValidationFailedEvent(errs []error, configVersion string, podGeneration, term uint64) *ValidationFailedEvent {
	return &ValidationFailedEvent{Errors: errs, ConfigVersion: configVersion, PodGeneration: podGeneration, Term: term, at: time.Now()}
}

func (*ValidationFailedEvent) EventType() string { return EventTypeValidationFailed }

func (e *ValidationFailedEvent) Timestamp() time.Time { return e.at }
