package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/pkg/controller/leadership"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/termrun"
)

// Defaults for Options.
const (
	DefaultStopTimeout      = 5 * time.Second
	DefaultSubscribeTimeout = 2 * time.Second
	DefaultStepDownGrace    = termrun.DefaultStepDownGrace
	DefaultRestartDelay     = termrun.DefaultRestartDelay
)

// leadershipBuffer is the buffer of the Manager's leadership subscription:
// leadership events published while Run is busy (starting or stopping a
// term) wait there.
const leadershipBuffer = 64

// Options configure a Manager. The zero value takes the defaults written on
// each field.
type Options struct {
	// Logger receives the runtime's log lines; nil means slog.Default().
	Logger *slog.Logger
	// StopTimeout bounds how long the Manager waits for a term's components
	// (and, when Run ends, the all-replica ones) to return after their
	// context was cancelled; zero means DefaultStopTimeout (5s). A component
	// still running then is reported as overstaying and is not started again
	// until it has returned. For the leader-only components it is the
	// runner's OverstayAfter (pkg/termrun). Negative is invalid.
	StopTimeout time.Duration
	// RestartDelay is how long a leader-only component whose run failed (an
	// error, an early return or a panic) waits before the Manager starts it
	// again in the same term (pkg/termrun's policy); zero means
	// DefaultRestartDelay (1s). Negative is invalid.
	RestartDelay time.Duration
	// SubscribeTimeout bounds how long the Manager waits, at the start of a
	// term, for every leader-only component to call Subscribed before it runs
	// the term hooks anyway; zero means DefaultSubscribeTimeout (2s). A
	// component that misses it is reported, and the replays are published
	// again when it does subscribe. Negative is invalid.
	SubscribeTimeout time.Duration
	// OnTermReady, if set, is called once per term that becomes ready, on
	// the Manager's goroutine. It must not block: the Manager handles no
	// leadership change meanwhile.
	OnTermReady func(TermReport)
	// OnTermStopped, if set, is called once per term the Manager ended, on
	// the Manager's goroutine, once its components returned or overstayed.
	// It must not block.
	OnTermStopped func(TermStopReport)
	// CampaignUnsynced starts the campaigners (AddCampaigner) at once with
	// the other all-replica components. By default the Manager holds them
	// back until every all-replica Syncer reports Synced, so that a replica
	// without the state a leader needs does not campaign.
	CampaignUnsynced bool
	// StepDownGrace bounds how long this replica keeps leading a term that
	// misses a leader-only component: one still running from an earlier term
	// (it overstayed that term's end, so it cannot be started in this one),
	// or one that keeps failing in this term (it is restarted after
	// RestartDelay; pkg/termrun's rule: it failed for StepDownGrace in a
	// row). Such a term is unhealthy while a component is missing
	// (Status.Healthy, Status.Missing); once it has missed a component for
	// StepDownGrace the Manager calls StepDown, once per term, so that
	// another replica leads. Zero means DefaultStepDownGrace (10s). Negative
	// is invalid.
	StepDownGrace time.Duration
	// StepDown, if set, is asked to end term, so that another replica
	// leads, when the term missed a leader-only component for
	// StepDownGrace; reason says which and why. It is typically the
	// elector's Resign. It runs on the Manager's goroutine and must not
	// block; it reports whether it ended the term. Nil turns step-down off:
	// a term that misses a component is reported (unhealthy, logged,
	// counted) and keeps running.
	StepDown func(term uint64, reason error) bool
	// TermContext, if set, is asked at the start of each term for a context
	// that ends with the term at its source, typically the elector's term
	// context (the adapter's TermContext). The term's context then ends
	// when that context does, and also reports the term over (Err) as soon
	// as that context does, even before its Done channel closes or a
	// LostLeadershipEvent arrives: a replica resumed after a pause sees at
	// once that it no longer leads. Its Err is never non-nil while its Done
	// is open.
	TermContext func(term uint64) (context.Context, bool)
}

// withDefaults returns o with the zero durations replaced by the defaults, or an
// error naming the first negative one.
func (o Options) withDefaults() (Options, error) {
	for _, d := range []struct {
		name  string
		value *time.Duration
		def   time.Duration
	}{
		{"stopTimeout", &o.StopTimeout, DefaultStopTimeout},
		{"subscribeTimeout", &o.SubscribeTimeout, DefaultSubscribeTimeout},
		{"stepDownGrace", &o.StepDownGrace, DefaultStepDownGrace},
		{"restartDelay", &o.RestartDelay, DefaultRestartDelay},
	} {
		switch {
		case *d.value < 0:
			return o, fmt.Errorf("%w: %s %s is negative", ErrInvalidOptions, d.name, *d.value)
		case *d.value == 0:
			*d.value = d.def
		}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// Run states, in the only order they change.
const (
	runNew = iota
	runRunning
	runDone
)

// Manager is the controller runtime: it runs all-replica components for the
// life of Run and leader-only components once per leadership term. Create
// one with NewManager.
type Manager struct {
	bus    *busevents.EventBus
	opts   Options
	logger *slog.Logger
	// leaderCh is the leadership subscription made by NewManager; Run reads
	// it and unsubscribes it when it returns.
	leaderCh <-chan busevents.Event
	// kick wakes Run's loop after a component's goroutine or a signal
	// changed state; capacity 1, sent to without blocking.
	kick chan struct{}
	// runner runs the leader-only components of each term (pkg/termrun), and
	// the all-replica ones once each under procTerm, with the same overstay
	// rule; procTerm is set by Run before any component starts.
	runner   *termrun.Runner
	procTerm *termrun.Term
	// runs counts the component goroutines: one per all-replica component,
	// one per leader-only component and term.
	runs sync.WaitGroup
	// done is closed once Run returned and every component goroutine ended.
	done              chan struct{}
	leadershipDropped atomic.Uint64

	// mu guards the fields below, the fields of every unit, and the
	// mutable fields of every termState and member.
	mu sync.Mutex
	// term is the term in progress, nil between terms. Only Run's goroutine
	// changes it, under mu; that goroutine may read it without mu.
	term       *termState
	runState   int
	allReplica []*unit
	leaderOnly []*unit
	hooks      []hook
	units      map[string]*unit // by component name
	hookNames  map[string]bool
	lastTerm   uint64 // highest term started
	lastReady  TermReport
	counters   counters
	// campaignWaiting is true while campaigners wait for the Syncers.
	campaignWaiting bool
}

type counters struct {
	terms, readyTerms, failures, overstays, subscribeTimeouts, hookFailures uint64
	panics, missingTerms, stepDowns                                         uint64
}

// unit is a registered component. Its mutable fields are guarded by
// Manager.mu.
type unit struct {
	c          Component
	name       string
	leaderOnly bool
	index      int      // in Manager.leaderOnly, for a leader-only unit
	campaigner bool     // all-replica, started once the syncers synced (AddCampaigner)
	required   []string // deduplicated RequiredState, fixed at registration

	state                                          ComponentState
	running                                        bool   // a Start call is in flight
	runTerm                                        uint64 // term of the run in flight or of the last run
	lastErr                                        error
	starts, failures, overstays, subscribeTimeouts uint64
	panics                                         uint64
}

// hook is work run once per term.
type hook struct {
	name string
	fn   func(term uint64)
}

// NewManager returns a Manager for bus. It subscribes to BecameLeaderEvent
// and LostLeadershipEvent at once, with a Critical subscription, so it must
// be called before bus.Start: it returns ErrBusStarted otherwise. Run may
// then be called before or after bus.Start; leadership events published
// meanwhile wait in the subscription's buffer. A Manager
// that is never Run keeps that subscription until the bus stops.
func NewManager(bus *busevents.EventBus, opts Options) (*Manager, error) {
	if bus == nil {
		return nil, ErrNilBus
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if bus.Started() {
		return nil, ErrBusStarted
	}
	m := &Manager{
		bus:       bus,
		opts:      opts,
		logger:    opts.Logger,
		kick:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		units:     map[string]*unit{},
		hookNames: map[string]bool{},
	}
	m.runner, err = termrun.New(termrun.Config{
		RestartDelay: opts.RestartDelay, StepDownGrace: opts.StepDownGrace, OverstayAfter: opts.StopTimeout,
		Logger: opts.Logger, Observe: m.observe,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	m.leaderCh = busevents.Subscribe[busevents.Event](context.Background(), bus, "lifecycle-manager", leadershipBuffer,
		busevents.Types(leadership.EventTypeBecameLeader, leadership.EventTypeLostLeadership),
		busevents.Critical(func(busevents.Drop) { m.leadershipDropped.Add(1) }))
	return m, nil
}

// AddAllReplica registers a component that runs on every replica for the
// life of Run. It must be called before Run.
func (m *Manager) AddAllReplica(c Component) error { return m.add(c, false, false) }

// AddLeaderOnly registers a component that runs once per term, while this
// replica leads; the same instance is started again in every term. If it
// implements StateDependent, the term is ready only once it reported
// HoldsState for each type it requires. It must be called before Run.
func (m *Manager) AddLeaderOnly(c Component) error { return m.add(c, true, false) }

func (m *Manager) add(c Component, leaderOnly, campaigner bool) error {
	if isNil(c) {
		return fmt.Errorf("%w: component is nil", ErrInvalidRegistration)
	}
	name := c.Name()
	if name == "" {
		return fmt.Errorf("%w: component name is empty (%T)", ErrInvalidRegistration, c)
	}
	u := &unit{c: c, name: name, leaderOnly: leaderOnly, campaigner: campaigner}
	if sd, ok := c.(StateDependent); ok {
		if !leaderOnly {
			return fmt.Errorf("%w: %s: only leader-only components can be StateDependent", ErrInvalidRegistration, name)
		}
		for _, t := range sd.RequiredState() {
			if t == "" {
				return fmt.Errorf("%w: %s: required state type is empty", ErrInvalidRegistration, name)
			}
			if !slices.Contains(u.required, t) {
				u.required = append(u.required, t)
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runState != runNew {
		return ErrRunning
	}
	if m.units[name] != nil {
		return fmt.Errorf("%w: component name %q already registered", ErrInvalidRegistration, name)
	}
	m.units[name] = u
	if leaderOnly {
		u.index = len(m.leaderOnly)
		m.leaderOnly = append(m.leaderOnly, u)
	} else {
		m.allReplica = append(m.allReplica, u)
	}
	return nil
}

// AddReplayer registers r's Replay as a term hook named name: it is
// AddTermHook(name, func(uint64) { r.Replay() }). Register replayers before
// the other term hooks (such as the reconciler's trigger), so that they run
// first.
func (m *Manager) AddReplayer(name string, r Replayer) error {
	if isNil(r) {
		return fmt.Errorf("%w: replayer %q is nil", ErrInvalidRegistration, name)
	}
	return m.addHook(hook{name: name, fn: func(uint64) {
		if !r.Replay() {
			m.logger.Debug("replayer had no state", "replayer", name)
		}
	}})
}

// AddTermHook registers fn to run once per term, on the Manager's goroutine,
// after every leader-only component signalled Subscribed (or
// SubscribeTimeout passed), in registration order. All hooks run again,
// later in the term, for a leader-only component that signals Subscribed
// after they ran, so that it too gets the replays and the fresh trigger; a
// hook must therefore be safe to run twice in a term (replays are: a
// subscriber that holds the state is skipped). fn must not block; a
// panic in it is recovered, logged and counted. It must be called before
// Run.
func (m *Manager) AddTermHook(name string, fn func(term uint64)) error {
	if fn == nil {
		return fmt.Errorf("%w: term hook %q is nil", ErrInvalidRegistration, name)
	}
	return m.addHook(hook{name: name, fn: fn})
}

func (m *Manager) addHook(h hook) error {
	if h.name == "" {
		return fmt.Errorf("%w: term hook name is empty", ErrInvalidRegistration)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runState != runNew {
		return ErrRunning
	}
	if m.hookNames[h.name] {
		return fmt.Errorf("%w: term hook name %q already registered", ErrInvalidRegistration, h.name)
	}
	m.hookNames[h.name] = true
	m.hooks = append(m.hooks, h)
	return nil
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// Done returns a channel that the Manager closes once Run has returned and
// every component goroutine it started has ended (an overstaying component
// can outlive Run). It is never closed if Run is never called.
func (m *Manager) Done() <-chan struct{} { return m.done }

// Run runs the components until ctx is done, and returns nil then; it
// returns ErrBusStopped if the bus is stopped under it, and ErrRunning if
// called twice.
//
// It starts every all-replica component at once. On each BecameLeaderEvent
// it starts a term: every leader-only component under a context carrying
// the term, then, once they all signalled Subscribed (or SubscribeTimeout
// passed), the term hooks in registration order. The term is ready once every
// StateDependent component reported HoldsState for all it requires: the
// Manager records the latency from the event's timestamp and calls
// OnTermReady. On a LostLeadershipEvent for the term, on a
// BecameLeaderEvent with a newer term, and when ctx ends, it cancels the
// term's context and waits for its components (StopTimeout). When ctx ends it
// stops the term first, then the all-replica components, with the same
// bound. Component failures never stop Run; they are visible in Status.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.runState != runNew {
		m.mu.Unlock()
		return ErrRunning
	}
	m.runState = runRunning
	m.mu.Unlock()
	defer busevents.Unsubscribe(m.bus, m.leaderCh)

	// Components get contexts that keep ctx's values but are cancelled only
	// by the Manager, so that it can stop the leader-only side first.
	base := context.WithoutCancel(ctx)
	procCtx, procCancel := context.WithCancelCause(base)
	defer procCancel(nil)
	m.procTerm = m.runner.Term(procCtx, nil)

	gate := m.startAllReplica(procCtx)
	// Terms derive from base marked leader-only for the bus: every
	// subscription a leader-only component makes under its context is
	// leader-only, whether or not its author remembered to say so.
	err := m.loop(ctx, busevents.WithLeaderOnly(base), procCtx, gate)
	gate.stop()
	m.shutdown(err, procCancel)
	return err
}

// loop handles leadership events, wake-ups and the campaign gate until ctx
// ends or the bus stops. It runs on Run's goroutine.
func (m *Manager) loop(ctx, base, procCtx context.Context, gate *campaignGate) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var timerC <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-m.leaderCh:
			if !ok {
				m.logger.Error("event bus stopped under the controller runtime; stopping")
				return ErrBusStopped
			}
			m.handleLeadership(base, ev)
		case <-m.kick:
		case <-timerC:
		case <-gate.tick():
			gate.check(m, procCtx)
		}
		if next := m.step(); next.IsZero() {
			timer.Stop()
			timerC = nil
		} else {
			timer.Reset(time.Until(next))
			timerC = timer.C
		}
	}
}

// shutdown ends the term, then stops the all-replica components. It runs
// on Run's goroutine.
func (m *Manager) shutdown(err error, procCancel context.CancelCauseFunc) {
	reason, cause := "manager stopping", ErrManagerStopped
	if err != nil {
		reason, cause = "event bus stopped", err
	}
	if t := m.term; t != nil {
		m.endTerm(t, reason, cause)
	}
	procCancel(cause)
	m.mu.Lock()
	var waiting []*unit
	for _, u := range m.allReplica {
		if u.running {
			u.state = StateStopping
			waiting = append(waiting, u)
		}
	}
	m.mu.Unlock()
	m.awaitStopped(waiting, 0)
	m.mu.Lock()
	m.runState = runDone
	m.mu.Unlock()
	// Overstaying components may outlive Run; Done tells when they ended.
	go func() {
		m.runs.Wait()
		close(m.done)
	}()
	m.logger.Info("controller runtime stopped")
}

// handleLeadership starts or ends a term. It runs on Run's goroutine.
func (m *Manager) handleLeadership(base context.Context, ev busevents.Event) {
	cur := m.term
	switch e := ev.(type) {
	case *leadership.BecameLeaderEvent:
		switch {
		case e.Term == 0:
			m.logger.Warn("ignoring BecameLeaderEvent without a term", "identity", e.Identity)
			return
		case cur != nil && e.Term == cur.term:
			m.logger.Debug("ignoring repeated BecameLeaderEvent", "term", e.Term)
			return
		case e.Term <= m.lastTerm:
			m.logger.Warn("ignoring BecameLeaderEvent for a term not newer than the last one started",
				"term", e.Term, "lastTerm", m.lastTerm)
			return
		}
		if cur != nil {
			reason := fmt.Sprintf("superseded by term %d", e.Term)
			m.endTerm(cur, reason, fmt.Errorf("%w: %s", ErrLeadershipLost, reason))
		}
		m.startTerm(base, e)
	case *leadership.LostLeadershipEvent:
		if cur == nil {
			m.logger.Debug("ignoring LostLeadershipEvent while not leading", "term", e.Term)
			return
		}
		if e.Term != 0 && e.Term < cur.term {
			m.logger.Debug("ignoring LostLeadershipEvent for an earlier term", "term", e.Term, "currentTerm", cur.term)
			return
		}
		reason, cause := "lost leadership", ErrLeadershipLost
		if e.Reason != "" {
			reason = "lost leadership: " + e.Reason
			cause = fmt.Errorf("%w: %s", ErrLeadershipLost, e.Reason)
		}
		m.endTerm(cur, reason, cause)
	}
}

// launch is a component run prepared under mu and started after it.
type launch struct {
	u   *unit
	ctx context.Context
	tok *runToken
}

// prepareLocked marks u as running in term t (nil for all-replica) under
// parent, the term's context or the all-replica one, and returns what
// launchAll starts. m.mu must be held.
func (m *Manager) prepareLocked(u *unit, parent context.Context, t *termState, mem *member) launch {
	tok := &runToken{m: m, u: u, t: t, mem: mem}
	u.running = true
	u.state = StateRunning
	u.starts++
	if t != nil {
		u.runTerm = t.term
	}
	return launch{u: u, ctx: context.WithValue(parent, runKey{}, tok), tok: tok}
}

// launchAll starts each run on a goroutine of its own, on the runner: an
// all-replica component's Start once, a leader-only component's in its term,
// restarted after a failure. It runs on Run's goroutine, before shutdown
// waits for the runs.
func (m *Manager) launchAll(ls []launch) {
	for _, l := range ls {
		m.runs.Go(func() {
			var err error
			if t := l.tok.t; t != nil {
				err = t.run.Run(l.u.name, m.runFunc(l))
			} else {
				err = m.procTerm.Once(l.u.name, m.runFunc(l))
			}
			m.exited(l, err)
		})
	}
}

// runFunc is the termrun.Func of a component: each run gets a token of its
// own (the first was prepared with the launch; a leader-only component's
// restart gets the next), and a return while the run's context is live is a
// failure (Component).
func (m *Manager) runFunc(l launch) termrun.Func {
	restart := false
	return func(ctx context.Context) error {
		tok := l.tok
		if restart {
			tok = m.restarting(l.tok)
		}
		restart = true
		ctx = context.WithValue(ctx, runKey{}, tok)
		return returnedEarly(ctx, l.u.c.Start(ctx))
	}
}

// restarting records that the runner starts tok's component again in its
// term, after a failure, and returns the new run's token: the run signals
// Subscribed and HoldsState afresh, and gets the replays once more.
func (m *Manager) restarting(tok *runToken) *runToken {
	now := time.Now()
	m.mu.Lock()
	u, mem := tok.u, tok.mem
	mem.down, mem.subscribed, mem.timedOut, mem.covered = false, false, false, false
	mem.held = map[string]bool{}
	mem.deadline = now.Add(m.opts.SubscribeTimeout)
	if u.state == StateFailed {
		u.state = StateRunning
	}
	u.starts++
	next := &runToken{m: m, u: u, t: tok.t, mem: mem, run: mem.run}
	m.mu.Unlock()
	m.wake()
	return next
}

// returnedEarly returns err, the return of a Start under ctx, as a failure
// when ctx is still live: ErrReturnedEarly for nil, and wrapping a context
// error (of a context of the component's own).
func returnedEarly(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return err
	case err == nil:
		return ErrReturnedEarly
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", ErrReturnedEarly, err)
	}
	return err
}

// exited records the end of a component's goroutine, then reports it. Its
// failures were recorded as the runner reported them (observe); err is nil
// unless its last run failed.
func (m *Manager) exited(l launch, err error) {
	u, tok := l.u, l.tok
	m.mu.Lock()
	overstayed := u.state == StateOverstaying
	u.running = false
	if err == nil {
		u.state = StateStopped
	}
	if tok.mem != nil {
		tok.mem.exited = true
	}
	m.mu.Unlock()
	var term uint64
	if tok.t != nil {
		term = tok.t.term
	}
	m.wake()

	switch {
	case err != nil:
	case overstayed:
		m.logger.Info("overstaying component returned at last", "component", u.name, "term", term)
	default:
		m.logger.Debug("component stopped", "component", u.name, "term", term)
	}
}

// failedLocked records a failed run of u. m.mu must be held.
func (m *Manager) failedLocked(u *unit, err error) {
	u.state = StateFailed
	u.lastErr = err
	u.failures++
	m.counters.failures++
	if errors.Is(err, ErrPanicked) {
		u.panics++
		m.counters.panics++
	}
}

// observe records what the runner reports of a component, on that
// component's goroutine: a failed run (a leader-only one restarted, or at
// the term's end) and a run that overstays its term, or Run's end for an
// all-replica component. A step-down comes through the term's step-down
// function (failing).
func (m *Manager) observe(ev termrun.Event) {
	m.mu.Lock()
	u := m.units[ev.Work]
	if u == nil || ev.Kind == termrun.SteppedDown {
		m.mu.Unlock()
		return
	}
	term := ev.Term.Number
	if !u.leaderOnly {
		term = 0
	}
	if ev.Kind == termrun.Failed {
		m.failedLocked(u, ev.Err)
		if t := m.term; ev.Restart && t != nil && t.term == term {
			// What the failed run held, it no longer does, and its signals
			// from now on are stale (run).
			mem := t.members[u.index]
			mem.down, mem.held = true, map[string]bool{}
			mem.run++
		}
	} else if u.running && u.runTerm == term {
		u.state = StateOverstaying
		u.overstays++
		m.counters.overstays++
	}
	m.mu.Unlock()
	// Published before the Manager is woken, so that the event comes before
	// what the Manager does next (a term's stop report, Run's return).
	if ev.Kind == termrun.Failed {
		m.bus.Publish(NewComponentFailedEvent(u.name, u.leaderOnly, term, ev.Err))
	} else {
		m.bus.Publish(NewComponentOverstayedEvent(u.name, term, OverstayStop, ev.Waited))
	}
	m.wake()
}

func (m *Manager) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// awaitStopped waits until each of us that runs in term has returned or
// was reported overstaying by the runner (StopTimeout after the term's end),
// and returns the overstayers' names. It runs on Run's goroutine.
func (m *Manager) awaitStopped(us []*unit, term uint64) []string {
	for {
		var over []string
		pending := false
		m.mu.Lock()
		for _, u := range us {
			switch {
			case !u.running || u.runTerm != term:
			case u.state == StateOverstaying:
				over = append(over, u.name)
			default:
				pending = true
			}
		}
		m.mu.Unlock()
		if !pending {
			return over
		}
		<-m.kick
	}
}

// Status returns a snapshot of the Manager; it is safe to call at any time
// from any goroutine.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.term
	s := Status{
		Running:           m.runState == runRunning,
		LastReady:         m.lastReady,
		Terms:             m.counters.terms,
		ReadyTerms:        m.counters.readyTerms,
		Failures:          m.counters.failures,
		Overstays:         m.counters.overstays,
		SubscribeTimeouts: m.counters.subscribeTimeouts,
		HookFailures:      m.counters.hookFailures,
		Panics:            m.counters.panics,
		MissingTerms:      m.counters.missingTerms,
		StepDowns:         m.counters.stepDowns,
		CampaignWaiting:   m.campaignWaiting,
		LeadershipDropped: m.leadershipDropped.Load(),
		Components:        make([]ComponentStatus, 0, len(m.allReplica)+len(m.leaderOnly)),
	}
	if t != nil {
		s.Leading = true
		s.Term = t.term
		s.TermAcquired = t.acquired
		s.TermReady = !t.readyAt.IsZero()
		s.MissingSince = t.missingSince
		s.SteppingDown = t.steppedDown
	}
	for _, u := range m.allReplica {
		s.Components = append(s.Components, u.statusLocked())
	}
	for i, u := range m.leaderOnly {
		cs := u.statusLocked()
		if t != nil {
			mem := t.members[i]
			if missingLocked(mem) {
				cs.Missing = true
				s.Missing = append(s.Missing, u.name)
			}
			cs.Subscribed = mem.subscribed
			for _, typ := range u.required {
				if mem.held[typ] {
					cs.HeldState = append(cs.HeldState, typ)
				}
			}
		}
		s.Components = append(s.Components, cs)
	}
	return s
}

func (u *unit) statusLocked() ComponentStatus {
	return ComponentStatus{
		Name:              u.name,
		LeaderOnly:        u.leaderOnly,
		State:             u.state,
		Term:              u.runTerm,
		LastError:         u.lastErr,
		RequiredState:     slices.Clone(u.required),
		Starts:            u.starts,
		Failures:          u.failures,
		Overstays:         u.overstays,
		SubscribeTimeouts: u.subscribeTimeouts,
		Panics:            u.panics,
	}
}
