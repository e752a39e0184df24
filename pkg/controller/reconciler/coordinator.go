package reconciler

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	"github.com/baton-dev/baton/pkg/controller/pipeline"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/termctx"
)

// CoordinatorOptions configure a Coordinator. The zero value takes the
// defaults written on each field.
type CoordinatorOptions struct {
	// Pipeline renders and validates; nil means pipeline.NewDefault().
	Pipeline *pipeline.Pipeline
	// Buffer is the size of the leader-only subscription; zero means
	// DefaultBuffer (64). Every type is LatestValue: a full buffer sheds
	// superseded configurations and pods and coalesces queued triggers into
	// the newest, so neither the newest state nor a trigger is ever lost,
	// and a trigger never overtakes state published before it. Negative is
	// invalid.
	Buffer int
	// Logger receives the log lines; nil means slog.Default().
	Logger *slog.Logger
	// Latest, if set, returns the newest configuration and pods the
	// all-replica side handed out (their replayers' Get: a replayer caches
	// before it publishes, so it never holds older state than the bus
	// delivered). A run then starts from it, once the Coordinator holds
	// both inputs, rather than from the newest it received: the bus may
	// deliver a newer version of state, which replaced an older one waiting
	// in a full buffer, after a trigger published later than the older one.
	// Either return may be nil (not handed out yet): the received input is
	// used then.
	Latest func() (*events.ConfigValidatedEvent, *events.HAProxyPodsDiscoveredEvent)
	// NoRenderCache makes every trigger run the pipeline. By default the
	// Coordinator keeps the outcome of its last run that returned no error,
	// keyed by its input (see renderKey), and a run on the same input, such
	// as the render a new term starts with when nothing changed since the
	// last one, publishes that outcome, stamped with the current term,
	// without rendering again. Set it when the Pipeline's steps depend on
	// anything but their Input.
	NoRenderCache bool
}

// LastRun describes the most recent pipeline run of a term.
type LastRun struct {
	ConfigVersion string
	PodGeneration uint64
	Valid         bool
	Errors        int           // findings, or 1 for a pipeline error
	Duration      time.Duration // render plus validate; zero when Cached
	At            time.Time
	// Cached is true when the outcome was the render cache's: the same
	// input was rendered and validated before (CoordinatorOptions).
	Cached bool
}

// CoordinatorStatus is a snapshot of a Coordinator's current (or last)
// term.
type CoordinatorStatus struct {
	Running bool   // Start is in progress
	Term    uint64 // of the current or last run; 0 outside a lifecycle term
	// HasConfig and HasPods say which inputs the term holds, and which
	// versions.
	HasConfig     bool
	ConfigVersion string
	HasPods       bool
	PodGeneration uint64
	// Triggers received, Runs made, and Coalesced triggers that did not
	// get a run of their own because one was already due; all this term.
	Triggers  uint64
	Runs      uint64
	Coalesced uint64
	// Rendered and Failed count the TemplateRenderedEvents and
	// ValidationFailedEvents published this term.
	Rendered uint64
	Failed   uint64
	// Waiting is true while a trigger waits for an input to arrive.
	Waiting bool
	// Last is the most recent run this term, if any.
	Last *LastRun
}

// Coordinator is the leader-only component that runs the pipeline: for each
// ReconciliationTriggeredEvent it renders and validates the latest
// configuration and pods it holds, and publishes a TemplateRenderedEvent
// (valid) or a ValidationFailedEvent (invalid, or the pipeline failed),
// stamped with the term. Create it with NewCoordinator and register it with
// lifecycle.Manager.AddLeaderOnly; it implements lifecycle.Component and
// lifecycle.StateDependent.
type Coordinator struct {
	bus      *busevents.EventBus
	pipeline *pipeline.Pipeline
	buffer   int
	logger   *slog.Logger
	latest   func() (*events.ConfigValidatedEvent, *events.HAProxyPodsDiscoveredEvent)
	noCache  bool
	subOpts  []busevents.SubscribeOption // of the subscription, made once
	running  atomic.Bool
	// cache is the render cache: the last run that returned no error.
	// Only the Start in progress touches it (running orders the Starts).
	cache renderCache

	// mu guards status and lastRun, which status.Last points at once a
	// run of the current term finished: one LastRun, rewritten with the
	// counters of the same run (publishStatus), so that a run allocates
	// none.
	mu      sync.Mutex
	status  CoordinatorStatus
	lastRun LastRun
}

// NewCoordinator returns a Coordinator publishing on bus. It subscribes
// nothing until Start.
func NewCoordinator(bus *busevents.EventBus, opts CoordinatorOptions) (*Coordinator, error) {
	if bus == nil {
		return nil, ErrNilBus
	}
	if opts.Buffer < 0 {
		return nil, fmt.Errorf("%w: buffer %d is negative", ErrInvalidOptions, opts.Buffer)
	}
	if opts.Buffer == 0 {
		opts.Buffer = DefaultBuffer
	}
	if opts.Pipeline == nil {
		opts.Pipeline = pipeline.NewDefault()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Coordinator{bus: bus, pipeline: opts.Pipeline, buffer: opts.Buffer, logger: opts.Logger,
		latest: opts.Latest, noCache: opts.NoRenderCache,
		subOpts: []busevents.SubscribeOption{busevents.Types(inputTypes[0], inputTypes[1:]...), busevents.LatestValue()}}, nil
}

// Name returns "reconciler-coordinator".
func (c *Coordinator) Name() string { return "reconciler-coordinator" }

// RequiredState returns the configuration and pods event types: a term is
// not ready until the Coordinator holds both.
func (c *Coordinator) RequiredState() []string {
	return []string{events.EventTypeConfigValidated, events.EventTypeHAProxyPodsDiscovered}
}

// Status returns a snapshot of the current (or last) term.
func (c *Coordinator) Status() CoordinatorStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.status
	if s.Last != nil {
		last := *s.Last
		s.Last = &last
	}
	return s
}

// term is one run of Start: its state is new for every term. All fields
// belong to Start's goroutine.
type term struct {
	c       *Coordinator
	ctx     context.Context
	number  uint64
	cfg     *events.ConfigValidatedEvent
	pods    *events.HAProxyPodsDiscoveredEvent
	pending bool   // a trigger waits for a run
	reason  string // of the first trigger pending
	waitLog bool   // "waits for its inputs" logged for the pending trigger
	// running is non-nil while a pipeline run is in flight: the run's
	// goroutine sends its outcome on it (capacity 1) and exits.
	running chan outcome
	// runKey is the render cache key of the run in flight.
	runKey   renderKey
	counters CoordinatorStatus
	// last is the term's last finished run, for publishStatus; hasLast
	// is false until one finished.
	last    LastRun
	hasLast bool
}

// outcome is the result of one pipeline run.
type outcome struct {
	in       pipeline.Input
	reason   string
	res      pipeline.Result
	err      error
	panicked *panicked // non-nil when a pipeline step panicked
	cached   bool      // res is the render cache's
}

// panicked is a panic recovered from a pipeline step.
type panicked struct {
	value any
	stack []byte
}

// Start runs one term, until ctx is done; it then waits for a pipeline run
// in flight to return (the run's context is ctx), unsubscribes and returns
// nil. It returns ErrSubscriptionClosed if the bus stopped first,
// ErrAlreadyRunning while another Start of the instance is in progress, and
// an error wrapping ErrPipelinePanicked (and lifecycle.ErrPanicked) when a
// pipeline step panicked: the panic is recovered, logged with its stack,
// and fails the term.
//
// It resets the per-term state, subscribes leader-only (one subscription,
// so that the order of state and triggers is kept; every type LatestValue,
// so a full buffer coalesces triggers instead of losing them), calls
// lifecycle.Subscribed(ctx), and handles events as they come, also while
// the pipeline runs. Before a run starts it takes every event already
// queued, so the run starts from the newest inputs the bus accepted. The term is taken from
// termctx.FromContext; outside a lifecycle term (a plain context) the
// term is 0, which no fencing writer accepts, and a warning is logged.
//
// A trigger starts a run on the newest inputs held. Runs never overlap:
// triggers that arrive during a run, however many, give exactly one
// follow-up run, on the newest inputs held when the first run ends. A
// trigger that finds an input missing waits for it (this is logged) and
// runs when the input arrives. State alone starts no run.
func (c *Coordinator) Start(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer c.running.Store(false)

	number, ok := termctx.FromContext(ctx)
	if !ok {
		c.logger.Warn("coordinator started outside a lifecycle term; its renders carry term 0")
	}
	t := &term{c: c, ctx: ctx, number: number}
	c.mu.Lock()
	c.status = CoordinatorStatus{Running: true, Term: number}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.status.Running = false
		c.mu.Unlock()
	}()

	// One subscription keeps state and triggers in publish order, and every
	// type is latest-value: a full buffer sheds superseded state and
	// coalesces queued triggers into the newest, so no trigger is lost and
	// none overtakes the state published before it. It is leader-only by
	// registration: ctx comes from the Manager's term, and the channel
	// closes when the term ends.
	ch := busevents.Subscribe[busevents.Event](ctx, c.bus, c.Name(), c.buffer, c.subOpts...)
	lifecycle.Subscribed(ctx)
	defer t.wait()

	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-ch:
			if ok {
				t.handle(ev)
				ok = t.drain(ch)
			}
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return ErrSubscriptionClosed
			}
		case o := <-t.running:
			t.running = nil
			if o.panicked != nil {
				return t.failPanic(o)
			}
			t.finish(o)
		}
		if t.due() {
			t.start()
		}
		t.publishStatus()
	}
}

// inputTypes are the Coordinator's subscription: its two inputs and the
// trigger.
var inputTypes = []string{events.EventTypeConfigValidated, events.EventTypeHAProxyPodsDiscovered, events.EventTypeReconciliationTriggered}

// drain handles every event the subscription has ready, without waiting, so
// that a run due after a trigger starts from the newest state queued behind
// it too. It reports false when the bus closed the subscription.
func (t *term) drain(ch <-chan busevents.Event) bool {
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return false
			}
			t.handle(ev)
		default:
			return true
		}
	}
}

func (t *term) handle(ev busevents.Event) {
	switch e := ev.(type) {
	case *events.ConfigValidatedEvent:
		first := t.cfg == nil
		t.cfg = e
		if first {
			lifecycle.HoldsState(t.ctx, events.EventTypeConfigValidated)
		}
	case *events.HAProxyPodsDiscoveredEvent:
		first := t.pods == nil
		t.pods = e
		if first {
			lifecycle.HoldsState(t.ctx, events.EventTypeHAProxyPodsDiscovered)
		}
	case *events.ReconciliationTriggeredEvent:
		t.trigger(e.Reason)
	}
}

func (t *term) trigger(reason string) {
	t.counters.Triggers++
	if t.pending {
		t.counters.Coalesced++
		return
	}
	t.pending, t.reason, t.waitLog = true, reason, false
}

// due reports whether a run should start now: a trigger is pending, no run
// is in flight and both inputs are held. It logs, once, a trigger that has
// to wait for inputs.
func (t *term) due() bool {
	if !t.pending || t.running != nil {
		return false
	}
	if t.cfg != nil && t.pods != nil {
		return true
	}
	if !t.waitLog {
		t.waitLog = true
		var missing []string
		if t.cfg == nil {
			missing = append(missing, events.EventTypeConfigValidated)
		}
		if t.pods == nil {
			missing = append(missing, events.EventTypeHAProxyPodsDiscovered)
		}
		t.c.logger.Info("reconciliation waits for its inputs", "term", t.number, "reason", t.reason, "missing", missing)
	}
	return false
}

// start runs the pipeline on the inputs held, in a goroutine that reports
// on t.running.
// An input the render cache holds is not run again: its outcome is
// finished at once, on Start's goroutine.
func (t *term) start() {
	t.takeLatest()
	in := pipeline.Input{Config: t.cfg.Config, ConfigVersion: t.cfg.Version, Pods: t.pods.Pods, PodGeneration: t.pods.Generation}
	reason := t.reason
	t.pending = false
	t.counters.Runs++
	key := renderKeyOf(t.cfg, t.pods)
	if !t.c.noCache {
		if res, ok := t.c.cache.get(key); ok {
			t.finish(outcome{in: in, reason: reason, res: res, cached: true})
			return
		}
	}
	t.runKey = key
	done := make(chan outcome, 1)
	t.running = done
	p, ctx := t.c.pipeline, t.ctx
	go func() {
		o := outcome{in: in, reason: reason}
		defer func() { done <- o }()
		defer func() {
			if r := recover(); r != nil {
				o.panicked = &panicked{value: r, stack: debug.Stack()}
			}
		}()
		o.res, o.err = p.Execute(ctx, in)
	}()
}

// failPanic logs a pipeline step's panic with its stack and returns the
// error that fails the Coordinator's run: a leader that cannot render must
// not keep leading (the runtime ends the term and, by default, the replica
// steps down).
func (t *term) failPanic(o outcome) error {
	p := o.panicked
	t.c.logger.Error("pipeline step panicked; the coordinator fails its term", "term", t.number,
		"config_version", o.in.ConfigVersion, "pod_generation", o.in.PodGeneration,
		"panic", fmt.Sprint(p.value), "stack", string(p.stack))
	return fmt.Errorf("%w: %w: %v", ErrPipelinePanicked, lifecycle.ErrPanicked, p.value)
}

// takeLatest replaces the inputs held with the all-replica side's newest,
// when the Coordinator has a Latest source.
func (t *term) takeLatest() {
	if t.c.latest == nil {
		return
	}
	cfg, pods := t.c.latest()
	if cfg != nil {
		t.cfg = cfg
	}
	if pods != nil && pods.Generation >= t.pods.Generation {
		t.pods = pods
	}
}

// wait waits for a run in flight; its outcome is dropped.
func (t *term) wait() {
	if t.running != nil {
		<-t.running
		t.running = nil
	}
}

// finish publishes a run's outcome, unless the term ended meanwhile. A
// run that returned no error is kept in the render cache first.
func (t *term) finish(o outcome) {
	c, res, in := t.c, o.res, o.in
	if o.err == nil && !o.cached && !c.noCache {
		c.cache.put(t.runKey, res)
	}
	if t.ctx.Err() != nil {
		c.logger.Info("term ended during a reconciliation; its outcome is not published", "term", t.number)
		return
	}
	last := LastRun{ConfigVersion: in.ConfigVersion, PodGeneration: in.PodGeneration, Valid: o.err == nil && res.Valid(),
		Duration: res.RenderDuration + res.ValidateDuration, At: time.Now(), Cached: o.cached}
	switch {
	case o.err != nil:
		last.Errors = 1
	case !res.Valid():
		last.Errors = len(res.Errors)
	}
	t.last, t.hasLast = last, true
	switch {
	case o.err != nil:
		t.counters.Failed++
		t.publishStatus()
		if c.logger.Enabled(t.ctx, slog.LevelError) {
			t.runLogger(o).Error("reconciliation failed", "error", o.err)
		}
		c.bus.Publish(events.NewValidationFailedEvent([]error{o.err}, in.ConfigVersion, in.PodGeneration, t.number))
	case !res.Valid():
		t.counters.Failed++
		t.publishStatus()
		if c.logger.Enabled(t.ctx, slog.LevelWarn) {
			t.runLogger(o).Warn("rendered configuration is invalid; the last valid one stays", "errors", len(res.Errors),
				"first", res.Errors[0].Error(), "cached", o.cached)
		}
		c.bus.Publish(events.NewValidationFailedEvent(res.Errors, in.ConfigVersion, in.PodGeneration, t.number))
	default:
		t.counters.Rendered++
		t.publishStatus()
		if c.logger.Enabled(t.ctx, slog.LevelInfo) {
			t.runLogger(o).Info("rendered configuration", "bytes", len(res.Output), "render", res.RenderDuration,
				"validate", res.ValidateDuration, "cached", o.cached)
		}
		c.bus.Publish(events.NewTemplateRenderedEvent(res.Output, in.ConfigVersion, in.PodGeneration, t.number))
	}
}

// runLogger returns the logger of o's lines; it allocates, so it is called
// only for a line that is logged.
func (t *term) runLogger(o outcome) *slog.Logger {
	return t.c.logger.With("term", t.number, "reason", o.reason, "config_version", o.in.ConfigVersion,
		"pod_generation", o.in.PodGeneration)
}

// publishStatus copies the term's state into the Coordinator's status.
func (t *term) publishStatus() {
	s := t.counters
	s.Running, s.Term = true, t.number
	s.HasConfig, s.HasPods = t.cfg != nil, t.pods != nil
	if t.cfg != nil {
		s.ConfigVersion = t.cfg.Version
	}
	if t.pods != nil {
		s.PodGeneration = t.pods.Generation
	}
	s.Waiting = t.pending && (t.cfg == nil || t.pods == nil)
	t.c.mu.Lock()
	if t.hasLast { // with its counters, in one step: Status copies both
		t.c.lastRun = t.last
		s.Last = &t.c.lastRun
	}
	t.c.status = s
	t.c.mu.Unlock()
}
