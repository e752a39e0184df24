package leaderelection

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/controller/leadership"
	busevents "github.com/baton-dev/baton/pkg/events"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/termctx"
)

// Name is what Component.Name returns.
const Name = "leader-election"

// Reasons carried by LostLeadershipEvent.Reason, besides "lease taken by
// <identity>" when another candidate holds the lease, and the text of any
// other cause the elector gives.
const (
	// ReasonContextCancelled: the context given to Run ended (shutdown).
	ReasonContextCancelled = "context cancelled"
	// ReasonRenewDeadlineMissed: this replica could not renew the lease
	// within RenewDeadline, by its own clock.
	ReasonRenewDeadlineMissed = "renew deadline missed"
	// ReasonLeaseCleared: the lease was deleted or its holder cleared by
	// someone else.
	ReasonLeaseCleared = "lease deleted or cleared"
	// ReasonResigned: this replica resigned the term (Component.Resign),
	// typically because the runtime found a leader-only component missing.
	ReasonResigned = "resigned"
	// ReasonLeaseTakenPrefix starts the reason when another candidate holds
	// the lease; the holder's identity follows.
	ReasonLeaseTakenPrefix = "lease taken by "
	// ReasonHandedOver: this replica handed the lease over (HandOver, or the
	// lease's preferredHolder named another candidate).
	ReasonHandedOver = "handed over"
)

// Callbacks are called by a running Component, after the matching event was
// published. All are optional; they are called as the elector calls them
// (see pkg/k8s/leaderelection).
type Callbacks struct {
	// OnStartedLeading runs on the elector's leader goroutine once the term's
	// BecameLeaderEvent was published; ctx is the elector's term context.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading runs once per term, after the term's
	// LostLeadershipEvent was published.
	OnStoppedLeading func()
	// OnNewLeader runs for each observed change of holder, after the
	// NewLeaderObservedEvent was published.
	OnNewLeader func(identity string)
}

// Component runs a leader elector and publishes its transitions on the
// bus. Create it with New or NewWithStore; it is a lifecycle.Component
// (Name, Start) meant to be added as all-replica. What the elector itself
// answers (IsLeader, Term, GetLeader, HandOver, Stats, Healthy) is asked
// of it through Elector.
type Component struct {
	elector   *k8sle.Elector
	bus       *busevents.EventBus
	config    k8sle.Config
	callbacks Callbacks
	logger    *slog.Logger
	started   atomic.Bool
	// began carries each term from its OnStartedLeading wrapper, once its
	// BecameLeaderEvent is published, to the OnStoppedLeading wrapper of the
	// same term. The elector alternates the two strictly (one term at a
	// time), so it never holds more than one.
	began chan heldTerm

	// mu guards current.
	mu      sync.Mutex
	current heldTerm // the term whose BecameLeaderEvent was published last, until its LostLeadershipEvent
}

// heldTerm is one term as the adapter saw it.
type heldTerm struct {
	term uint64
	ctx  context.Context // the elector's term context
}

// New returns a Component electing through the coordination.k8s.io/v1 Lease
// config.LeaseNamespace/config.LeaseName with clientset. The errors, all at once,
// each a *k8sle.ConfigError wrapping k8sle.ErrInvalidConfig, name each bad
// argument or field: a nil bus ("bus"), a nil clientset ("clientset") and every
// invalid Config field. A nil logger means slog.Default().
func New(config k8sle.Config, clientset kubernetes.Interface, bus *busevents.EventBus, callbacks Callbacks, logger *slog.Logger) (*Component, error) {
	c, busErr := newComponent(config, bus, callbacks, logger)
	e, err := k8sle.New(config, clientset, c.electorCallbacks(), c.logger)
	if err = errors.Join(busErr, err); err != nil {
		return nil, err
	}
	c.elector = e
	return c, nil
}

// NewWithStore is New for any lease store, for example a k8sle.MemoryStore
// in the embedded mode. A nil store is reported as "store".
func NewWithStore(config k8sle.Config, store k8sle.LeaseStore, bus *busevents.EventBus, callbacks Callbacks, logger *slog.Logger) (*Component, error) {
	c, busErr := newComponent(config, bus, callbacks, logger)
	e, err := k8sle.NewWithStore(config, store, c.electorCallbacks(), c.logger)
	if err = errors.Join(busErr, err); err != nil {
		return nil, err
	}
	c.elector = e
	return c, nil
}

func newComponent(config k8sle.Config, bus *busevents.EventBus, callbacks Callbacks, logger *slog.Logger) (*Component, error) {
	if logger == nil {
		logger = slog.Default()
	}
	c := &Component{
		bus:       bus,
		config:    config,
		callbacks: callbacks,
		logger:    logger.With("component", Name),
		began:     make(chan heldTerm, 1),
	}
	if bus == nil {
		return c, &k8sle.ConfigError{Field: "bus", Reason: "bus is nil"}
	}
	return c, nil
}

func (c *Component) electorCallbacks() k8sle.Callbacks {
	return k8sle.Callbacks{
		OnStartedLeading: c.startedLeading,
		OnStoppedLeading: c.stoppedLeading,
		OnNewLeader:      c.newLeader,
	}
}

// Name returns "leader-election".
func (c *Component) Name() string { return Name }

// Run publishes LeaderElectionStartedEvent and runs the elector until ctx
// ends: it campaigns, leads and campaigns again in place. It returns nil
// after ctx ended (or the error of a failed release when ReleaseOnCancel is
// set), having published the LostLeadershipEvent of a running term; a
// second call returns k8sle.ErrAlreadyStarted and publishes nothing.
func (c *Component) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return k8sle.ErrAlreadyStarted
	}
	c.logger.Info("leader election started", "identity", c.config.Identity,
		"lease", c.config.LeaseNamespace+"/"+c.config.LeaseName, "singleReplica", c.config.SingleReplica)
	c.bus.Publish(leadership.NewLeaderElectionStartedEvent(c.config.Identity, c.config.LeaseNamespace, c.config.LeaseName))
	return c.elector.Start(ctx)
}

// Start is Run, so that the Component is a lifecycle.Component.
func (c *Component) Start(ctx context.Context) error { return c.Run(ctx) }

// Elector returns the elector the Component runs, for what it answers
// itself: IsLeader, Term, GetLeader, HandOver, Stats, Healthy (see
// k8sle.Elector). A handover through it ends the term with a
// LostLeadershipEvent carrying ReasonHandedOver.
func (c *Component) Elector() *k8sle.Elector { return c.elector }

// TermContext returns the elector's context of term while that term's
// BecameLeaderEvent is the last one published and its LostLeadershipEvent
// is not: it ends with the term, and reports it over (Err) by the local
// clock as soon as the renew deadline passed. It is meant for
// lifecycle.Options.TermContext, so that leader-only components stop at
// once. ok is false for any other term.
func (c *Component) TermContext(term uint64) (ctx context.Context, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current.ctx == nil || c.current.term != term {
		return nil, false
	}
	return c.current.ctx, true
}

// startedLeading runs in the elector's goroutine for the term.
func (c *Component) startedLeading(ctx context.Context) {
	term, _ := termctx.FromContext(ctx)
	l := heldTerm{term: term, ctx: ctx}
	c.mu.Lock()
	c.current = l
	c.mu.Unlock()
	c.logger.Debug("publishing BecameLeaderEvent", "identity", c.config.Identity, "term", term)
	c.bus.Publish(leadership.NewBecameLeaderEvent(c.config.Identity, term))
	c.began <- l // never blocks: see began
	if f := c.callbacks.OnStartedLeading; f != nil {
		f(ctx)
	}
}

// stoppedLeading runs on the elector's goroutine once per started term,
// possibly before startedLeading of that term ran: it waits for the term's
// BecameLeaderEvent, which is a matter of scheduling, so that the
// LostLeadershipEvent always follows it.
func (c *Component) stoppedLeading() {
	l := <-c.began
	c.mu.Lock()
	if c.current.term == l.term {
		c.current = heldTerm{}
	}
	c.mu.Unlock()
	reason := c.reason(l.ctx)
	c.logger.Info("lost leadership", "identity", c.config.Identity, "term", l.term, "reason", reason)
	c.bus.Publish(leadership.NewLostLeadershipEvent(c.config.Identity, l.term, reason))
	if f := c.callbacks.OnStoppedLeading; f != nil {
		f()
	}
}

// reason describes why the term of ctx ended, from its cause.
func (c *Component) reason(ctx context.Context) string {
	cause := context.Cause(ctx)
	switch {
	case cause == nil:
		return "term ended"
	case errors.Is(cause, k8sle.ErrRenewDeadlineMissed):
		return ReasonRenewDeadlineMissed
	case errors.Is(cause, k8sle.ErrHandedOver):
		return ReasonHandedOver
	case errors.Is(cause, k8sle.ErrResigned):
		return ReasonResigned
	case errors.Is(cause, k8sle.ErrLeaseLost):
		if h := c.elector.GetLeader(); h != "" && h != c.config.Identity {
			return ReasonLeaseTakenPrefix + h
		}
		return ReasonLeaseCleared
	case errors.Is(cause, context.Canceled), errors.Is(cause, context.DeadlineExceeded):
		return ReasonContextCancelled
	default:
		return cause.Error()
	}
}

func (c *Component) newLeader(identity string) {
	self := identity == c.config.Identity
	c.logger.Info("new leader observed", "leader", identity, "self", self)
	c.bus.Publish(leadership.NewNewLeaderObservedEvent(identity, self))
	if f := c.callbacks.OnNewLeader; f != nil {
		f(identity)
	}
}
