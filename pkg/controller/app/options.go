package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/baton-dev/baton/pkg/controller/configchange"
	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/deploymentscheduler"
	"github.com/baton-dev/baton/pkg/controller/discovery"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	"github.com/baton-dev/baton/pkg/controller/reconciler"
	"github.com/baton-dev/baton/pkg/controller/store"
	busevents "github.com/baton-dev/baton/pkg/events"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// Errors of the package. Wrapped errors can be tested with errors.Is.
var (
	// ErrInvalidOptions is wrapped by New and the mode helpers for options
	// they cannot use; the message names the field.
	ErrInvalidOptions = errors.New("app: invalid options")
	// ErrAlreadyRunning is returned by a second call to Replica.Run.
	ErrAlreadyRunning = errors.New("app: replica already running")
	// ErrNotReady is wrapped by Replica.Ready while the all-replica side
	// has not synced.
	ErrNotReady = errors.New("app: not ready")
	// ErrStopIncomplete is returned by Replica.Run when components were
	// still running StopTimeout after the bus stopped.
	ErrStopIncomplete = errors.New("app: components still running after stop")
)

// DefaultBusCapacity is the number of events the bus holds before it starts
// when Options.BusCapacity is zero.
const DefaultBusCapacity = 1024

// DiscoveryFunc makes the replica's Discovery on its bus, before the bus
// starts: discovery.NewCluster or discovery.NewSimulated.
type DiscoveryFunc func(bus *busevents.EventBus, logger *slog.Logger) (*discovery.Discovery, error)

// Hooks observe a replica. Every hook is optional and must not block; each
// runs where the component that calls it runs (noted per hook).
type Hooks struct {
	// OnStartedLeading runs in the elector's goroutine for the term, after
	// the BecameLeaderEvent was published; ctx is the elector's term
	// context (termctx.FromContext gives the term; it ends with the term).
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading runs on the election goroutine once per term, after
	// the LostLeadershipEvent was published.
	OnStoppedLeading func()
	// OnNewLeader runs for each observed change of lease holder.
	OnNewLeader func(identity string)
	// OnTakeover runs on the election goroutine when this replica's write
	// acquired the lease; prev is the lease as last seen before (its holder
	// and renew time), acquired as written. Handover is
	// acquired.AcquireTime - prev.RenewTime.
	OnTakeover func(prev, acquired k8sle.LeaseRecord)
	// OnReplay runs on the runtime's goroutine after each replayer ran,
	// with its name ("config", "pods") and whether it had state.
	OnReplay func(name string, replayed bool)
	// OnTermReady and OnTermStopped run on the runtime's goroutine, as
	// lifecycle.Options' callbacks of the same names.
	OnTermReady   func(lifecycle.TermReport)
	OnTermStopped func(lifecycle.TermStopReport)
	// OnPublish runs on the ConfigPublisher's goroutine after each write it
	// attempted (configpublisher.Options.OnWrite).
	OnPublish func(configpublisher.WriteReport)
}

// Options configure one replica. New checks them; the mode helpers
// (Cluster, Embedded.Options) fill them for their mode.
type Options struct {
	// Election configures the lease election; Election.Identity names
	// this replica (required) and must be unique among the replicas.
	// Zero durations take k8sle's defaults.
	Election k8sle.Config
	// LeaseStore keeps the lease. Required unless Election.SingleReplica.
	LeaseStore k8sle.LeaseStore
	// ConfigSource supplies the configuration documents. Required.
	ConfigSource configchange.Source
	// Discovery makes the pod Discovery. Required.
	Discovery DiscoveryFunc
	// Published keeps the object the ConfigPublisher writes. Required.
	Published store.Store
	// PublisherContent chooses what is published; nil means
	// configpublisher.RenderedContent{}: the output of the term's newest
	// valid render, under configpublisher.KeyRendered.
	PublisherContent configpublisher.Content
	// PublisherRetry is the publisher's retry interval; zero means
	// configpublisher.DefaultRetryInterval. Negative is invalid.
	PublisherRetry time.Duration
	// Scheduler configures the DeploymentScheduler; a nil Logger there
	// takes Logger.
	Scheduler deploymentscheduler.Options
	// Reconciler and Coordinator configure the reconciler's two halves; a
	// nil Logger there takes Logger.
	Reconciler  reconciler.ReconcilerOptions
	Coordinator reconciler.CoordinatorOptions
	// StopTimeout and SubscribeTimeout are the runtime's (lifecycle.Options);
	// zero means lifecycle's defaults, negative is invalid.
	StopTimeout      time.Duration
	SubscribeTimeout time.Duration
	// StepDownGrace is the runtime's (lifecycle.Options): how long a leader
	// keeps a term that misses a leader-only component before it resigns so
	// that another replica leads (zero means lifecycle.DefaultStepDownGrace,
	// negative is invalid). NoStepDown keeps such a term: the runtime gets
	// no StepDown.
	StepDownGrace time.Duration
	NoStepDown    bool
	// CampaignUnsynced lets the elector campaign at once. By default it
	// starts only once the ConfigChangeHandler has read a configuration and
	// the Discovery has published its first pod set (lifecycle's
	// AddCampaigner), so that a replica without the state a leader needs
	// never takes the lease.
	CampaignUnsynced bool
	// BusCapacity is the number of events the bus holds before it starts;
	// zero means DefaultBusCapacity, negative is invalid.
	BusCapacity int
	// AllReplica, if set, is called once the reference components exist
	// and returns more all-replica components, started with them (the
	// embedded PodSet's feed, observers).
	AllReplica func(r *Replica) ([]lifecycle.Component, error)
	// LeaderOnly, if set, is called once the reference components exist
	// and returns more leader-only components, started in every term after
	// the reference ones (a component of one's own, a fault injected by the
	// demo). A term misses each like any other (StepDownGrace).
	LeaderOnly func(r *Replica) ([]lifecycle.Component, error)
	// ProcessMetrics adds the Go and process collectors to /metrics; set it
	// when the process serves one replica.
	ProcessMetrics bool
	// Logger receives every component's log lines, with the attribute
	// replica=Identity; nil means slog.Default().
	Logger *slog.Logger
	// Hooks observe the replica.
	Hooks Hooks
}

// check returns every problem with o, each naming its field.
func (o Options) check() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...)))
	}
	if o.Election.Identity == "" {
		bad("election.identity is empty")
	}
	if !o.Election.SingleReplica && o.LeaseStore == nil {
		bad("leaseStore is nil")
	}
	if errs := validation.IsValidLabelValue(o.Election.LeaseName); o.LeaseStore != nil && len(errs) > 0 {
		bad("election.leaseName %q is not a valid label value, which the publisher marks its object with for the API server's fence: %s",
			o.Election.LeaseName, strings.Join(errs, "; "))
	}
	if o.ConfigSource == nil {
		bad("configSource is nil")
	}
	if o.Discovery == nil {
		bad("discovery is nil")
	}
	if o.Published == nil {
		bad("published is nil")
	}
	if o.PublisherRetry < 0 {
		bad("publisherRetry %v is negative", o.PublisherRetry)
	}
	if o.StopTimeout < 0 {
		bad("stopTimeout %v is negative", o.StopTimeout)
	}
	if o.SubscribeTimeout < 0 {
		bad("subscribeTimeout %v is negative", o.SubscribeTimeout)
	}
	if o.StepDownGrace < 0 {
		bad("stepDownGrace %v is negative", o.StepDownGrace)
	}
	if o.BusCapacity < 0 {
		bad("busCapacity %d is negative", o.BusCapacity)
	}
	return errors.Join(errs...)
}
