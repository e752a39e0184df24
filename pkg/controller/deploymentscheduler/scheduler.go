package deploymentscheduler

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/termctx"
)

// Name is the component name of the scheduler.
const Name = "deployment-scheduler"

// Defaults for Options.
const (
	DefaultMinInterval = 2 * time.Second
	DefaultHistorySize = 64
)

var subscribed = []string{
	events.EventTypeConfigValidated,
	events.EventTypeHAProxyPodsDiscovered,
	events.EventTypeLostLeadership,
}

// subscribeOpts are the options of the subscription, the state types
// LatestValue; made once, they cost a term nothing.
var subscribeOpts = []busevents.SubscribeOption{busevents.Types(subscribed[0], subscribed[1:]...), busevents.LatestValue(subscribed[:2]...)}

// Errors of the package.
var (
	// ErrNoTerm is returned by Start when its context carries no term: the
	// component was registered as all-replica instead of leader-only.
	ErrNoTerm = errors.New("deploymentscheduler: context carries no leadership term; register the scheduler as leader-only")
	// ErrAlreadyRunning is returned by Start while another Start of the same
	// component runs.
	ErrAlreadyRunning = errors.New("deploymentscheduler: already running")
)

// Deployment is one deployment the scheduler made.
type Deployment struct {
	Term          uint64
	Sequence      uint64 // within the term, from 1
	ConfigVersion string
	PodGeneration uint64
	Pods          int
	ReadyPods     int
	// Coalesced counts the input changes the deployment covers.
	Coalesced int
	At        time.Time
}

// DeployFunc carries a deployment out. It runs on Start's goroutine with
// the term's context and should return when that ends. An error leaves the
// deployment pending; it is tried again, rate limited.
type DeployFunc func(ctx context.Context, d Deployment) error

// Options configure a Component.
type Options struct {
	// MinInterval is the least time between two deployments of a term;
	// changes arriving meanwhile coalesce into the next one. Zero means
	// DefaultMinInterval; negative is invalid.
	MinInterval time.Duration
	// Deploy carries each deployment out; nil only records it.
	Deploy DeployFunc
	// HistorySize bounds History; zero means DefaultHistorySize, negative
	// is invalid.
	HistorySize int
	// Logger receives the component's log lines; nil means slog.Default().
	Logger *slog.Logger
}

// State is a snapshot of the scheduler.
type State struct {
	Running bool
	Term    uint64
	// Held state of the current term.
	HasConfig     bool
	ConfigVersion string
	HasPods       bool
	PodGeneration uint64
	// Pending is true while a deployment waits for the rate limit (or a
	// retry); PendingChanges counts the changes it will cover, DueAt is when
	// it goes.
	Pending        bool
	PendingChanges int
	DueAt          time.Time
	// Last is the last deployment of the current term; zero before one.
	Last Deployment
	// Counters over the life of the component.
	Deployments, Failures, Cleared uint64
}

// Component is the leader-only DeploymentScheduler: it deploys the valid
// configuration to the discovered pods, rate limited. Create one with New
// and register it with lifecycle.Manager.AddLeaderOnly.
type Component struct {
	bus     *busevents.EventBus
	min     time.Duration
	deploy  DeployFunc
	size    int
	logger  *slog.Logger
	running atomic.Bool

	// mu guards state and history.
	mu      sync.Mutex
	state   State
	history []Deployment
}

// New returns a scheduler on bus.
func New(bus *busevents.EventBus, opts Options) (*Component, error) {
	switch {
	case bus == nil:
		return nil, errors.New("deploymentscheduler: bus is nil")
	case opts.MinInterval < 0:
		return nil, errors.New("deploymentscheduler: options: min interval is negative")
	case opts.HistorySize < 0:
		return nil, errors.New("deploymentscheduler: options: history size is negative")
	}
	c := &Component{bus: bus, min: opts.MinInterval, deploy: opts.Deploy, size: opts.HistorySize, logger: opts.Logger}
	if c.min == 0 {
		c.min = DefaultMinInterval
	}
	if c.size == 0 {
		c.size = DefaultHistorySize
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	c.logger = c.logger.With("component", Name)
	return c, nil
}

// Name returns "deployment-scheduler".
func (c *Component) Name() string { return Name }

// RequiredState reports the state a term needs before it is ready: a valid
// configuration and the discovered pods.
func (c *Component) RequiredState() []string {
	return []string{events.EventTypeConfigValidated, events.EventTypeHAProxyPodsDiscovered}
}

// State returns a snapshot of the scheduler.
func (c *Component) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// History returns the last deployments, oldest first, across terms.
func (c *Component) History() []Deployment {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.history)
}

// run is one term's state; only Start's goroutine touches it.
type run struct {
	term     uint64
	cfg      *events.ConfigValidatedEvent
	pods     *events.HAProxyPodsDiscoveredEvent
	limit    limiter
	deployed struct {
		version    string
		generation uint64
		any        bool
	}
	sequence uint64
	pending  int // changes not yet deployed; 0: nothing pending
	timer    *time.Timer
	timerC   <-chan time.Time
	lost     bool // LostLeadershipEvent seen: deploy nothing more
}

// Start runs one term: it subscribes (leader-only), signals
// lifecycle.Subscribed, and deploys whenever it holds a valid configuration
// and pods that differ from the last deployed, at most once per MinInterval,
// until ctx ends; then it clears what was pending and returns nil. A
// LostLeadershipEvent clears the pending deployment at once and stops
// deploying for the rest of the term. It returns ErrNoTerm if ctx carries no
// term and ErrAlreadyRunning if another Start runs.
func (c *Component) Start(ctx context.Context) error {
	term, ok := termctx.FromContext(ctx)
	if !ok {
		return ErrNoTerm
	}
	if !c.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer c.running.Store(false)

	r := &run{term: term, limit: limiter{interval: c.min}}
	c.mu.Lock()
	c.state = State{Running: true, Term: term, Deployments: c.state.Deployments, Failures: c.state.Failures, Cleared: c.state.Cleared}
	c.mu.Unlock()

	// Leader-only by registration: ctx comes from the Manager's term, and
	// the channel closes when the term ends.
	ch := busevents.Subscribe[busevents.Event](ctx, c.bus, Name, 16, subscribeOpts...)
	lifecycle.Subscribed(ctx)
	defer func() {
		c.clear(r, "term ended")
		c.mu.Lock()
		c.state.Running = false
		c.mu.Unlock()
	}()

	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-ch:
			if !ok { // the term ended, or the bus stopped (the runtime ends the term)
				ch = nil
				continue
			}
			c.apply(ctx, r, e)
		case <-r.timerC:
			r.timerC = nil
		}
		c.schedule(ctx, r)
	}
}

// apply folds an event into the term's state.
func (c *Component) apply(ctx context.Context, r *run, e busevents.Event) {
	switch e := e.(type) {
	case *events.ConfigValidatedEvent:
		if r.cfg == nil {
			lifecycle.HoldsState(ctx, e.EventType())
		}
		r.cfg = e
	case *events.HAProxyPodsDiscoveredEvent:
		if r.pods == nil {
			lifecycle.HoldsState(ctx, e.EventType())
		}
		r.pods = e
	case *events.LostLeadershipEvent:
		if e.Term == 0 || e.Term >= r.term {
			r.lost = true
			c.clear(r, "lost leadership")
		}
		return
	default:
		return
	}
	if r.lost || r.cfg == nil || r.pods == nil {
		c.publishState(r)
		return
	}
	if r.deployed.any && r.deployed.version == r.cfg.Version && r.deployed.generation == r.pods.Generation {
		// Back to what is deployed: nothing to do.
		c.dropPending(r)
	} else {
		r.pending++
	}
	c.publishState(r)
}

// schedule deploys now if something is pending and the limiter allows, or
// arms the timer for when it will.
func (c *Component) schedule(ctx context.Context, r *run) {
	if r.pending == 0 || r.lost || ctx.Err() != nil || r.timerC != nil {
		return
	}
	now := time.Now()
	if wait := r.limit.wait(now); wait > 0 {
		c.arm(r, wait)
		return
	}
	r.limit.take(now)
	d := Deployment{
		Term: r.term, Sequence: r.sequence + 1, ConfigVersion: r.cfg.Version, PodGeneration: r.pods.Generation,
		Pods: len(r.pods.Pods), Coalesced: r.pending, At: now,
	}
	for _, p := range r.pods.Pods {
		if p.Ready {
			d.ReadyPods++
		}
	}
	if c.deploy != nil {
		if err := c.deploy(ctx, d); err != nil {
			if ctx.Err() != nil {
				return
			}
			c.mu.Lock()
			c.state.Failures++
			c.mu.Unlock()
			c.logger.Error("deployment failed; retrying", "term", r.term, "config_version", d.ConfigVersion,
				"pod_generation", d.PodGeneration, "retry_in", c.min, "error", err)
			c.arm(r, c.min)
			return
		}
	}
	r.sequence++
	r.pending = 0
	r.deployed.version, r.deployed.generation, r.deployed.any = d.ConfigVersion, d.PodGeneration, true
	c.mu.Lock()
	c.state.Deployments++
	c.state.Last = d
	c.history = append(c.history, d)
	if over := len(c.history) - c.size; over > 0 {
		c.history = slices.Delete(c.history, 0, over)
	}
	c.mu.Unlock()
	c.publishState(r)
	c.bus.Publish(events.NewDeploymentScheduledEvent(d.Term, d.Sequence, d.ConfigVersion, d.PodGeneration, d.Pods, d.ReadyPods, d.Coalesced))
	// LogAttrs: no allocation for the attributes, none at all when the
	// level is off (a deployment is made once per term at least).
	c.logger.LogAttrs(ctx, slog.LevelInfo, "deployment scheduled", slog.Uint64("term", d.Term), slog.Uint64("sequence", d.Sequence),
		slog.String("config_version", d.ConfigVersion), slog.Uint64("pod_generation", d.PodGeneration),
		slog.Int("pods", d.Pods), slog.Int("ready", d.ReadyPods), slog.Int("coalesced", d.Coalesced))
}

func (c *Component) arm(r *run, wait time.Duration) {
	if r.timer == nil {
		r.timer = time.NewTimer(wait)
	} else {
		r.timer.Reset(wait)
	}
	r.timerC = r.timer.C
	c.mu.Lock()
	c.state.DueAt = time.Now().Add(wait)
	c.mu.Unlock()
	c.publishState(r)
}

// dropPending forgets the pending deployment and stops its timer.
func (c *Component) dropPending(r *run) {
	r.pending = 0
	if r.timer != nil {
		r.timer.Stop()
	}
	r.timerC = nil
}

// clear drops in-progress state at the end of leadership.
func (c *Component) clear(r *run, why string) {
	had := r.pending
	c.dropPending(r)
	c.mu.Lock()
	if had > 0 {
		c.state.Cleared++
	}
	c.mu.Unlock()
	c.publishState(r)
	if had > 0 {
		c.logger.Info("pending deployment cleared", "term", r.term, "reason", why, "changes", had)
	}
}

// publishState copies the term's state into the snapshot.
func (c *Component) publishState(r *run) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &c.state
	if r.cfg != nil {
		s.HasConfig, s.ConfigVersion = true, r.cfg.Version
	}
	if r.pods != nil {
		s.HasPods, s.PodGeneration = true, r.pods.Generation
	}
	s.Pending, s.PendingChanges = r.pending > 0, r.pending
	if r.timerC == nil {
		s.DueAt = time.Time{}
	}
}
