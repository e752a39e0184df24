package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Elector campaigns for one lease, leads while it holds it, and campaigns again when it
// loses it, until the context given to Start ends. Create it with New or NewWithStore.
// Its methods are safe for concurrent use.
type Elector struct {
	config    Config // defaults applied
	store     LeaseStore
	callbacks Callbacks
	logger    *slog.Logger
	rand      func() float64 // jitter source, in [0, 1)

	started atomic.Bool
	// current is the term being led, nil while following. Written by the election
	// goroutine only.
	current atomic.Pointer[termContext]
	// wg counts the OnStartedLeading, OnNewLeader and watch-opening goroutines.
	wg sync.WaitGroup

	// leaderMu guards leader.
	leaderMu sync.Mutex
	leader   string
}

// New returns an Elector for the coordination.k8s.io/v1 Lease
// config.LeaseNamespace/config.LeaseName, read and written with clientset's typed
// client (see NewKubernetesStore). It returns an error wrapping ErrInvalidConfig, naming
// each bad field, when config is invalid or clientset is nil. A nil logger discards logs.
func New(config Config, clientset kubernetes.Interface, callbacks Callbacks, logger *slog.Logger) (*Elector, error) {
	if err := config.validate("clientset", clientset != nil); err != nil {
		return nil, err
	}
	var store LeaseStore
	if !config.SingleReplica {
		config = config.withDefaults()
		var err error
		if store, err = NewKubernetesStore(clientset, config.LeaseNamespace, config.LeaseName); err != nil {
			return nil, err
		}
	}
	return newElector(config, store, callbacks, logger), nil
}

// NewWithStore returns an Elector for the lease behind store, e.g. a MemoryStore for a
// single process. It returns an error wrapping ErrInvalidConfig, naming each bad field,
// when config is invalid or store is nil. A nil logger discards logs.
func NewWithStore(config Config, store LeaseStore, callbacks Callbacks, logger *slog.Logger) (*Elector, error) {
	if err := config.validate("store", store != nil); err != nil {
		return nil, err
	}
	if !config.SingleReplica {
		config = config.withDefaults()
	}
	return newElector(config, store, callbacks, logger), nil
}

func newElector(config Config, store LeaseStore, callbacks Callbacks, logger *slog.Logger) *Elector {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	attrs := []any{"identity", config.Identity}
	if store != nil {
		attrs = append(attrs, "lease", store.String())
	}
	return &Elector{
		config:    config,
		store:     store,
		callbacks: callbacks,
		logger:    logger.With(attrs...),
		rand:      rand.Float64,
	}
}

// Identity returns the configured identity.
func (e *Elector) Identity() string { return e.config.Identity }

// IsLeader reports whether this elector leads now: it holds a term, and by the local
// monotonic clock less than RenewDeadline has passed since the send time of its last
// successful renew.
func (e *Elector) IsLeader() bool {
	t := e.current.Load()
	return t != nil && t.Err() == nil
}

// Term returns the term of the current leadership, 0 when IsLeader is false.
func (e *Elector) Term() uint64 {
	if t := e.current.Load(); t != nil && t.Err() == nil {
		return t.term
	}
	return 0
}

// GetLeader returns the holder of the lease last observed, "" if none.
func (e *Elector) GetLeader() string {
	e.leaderMu.Lock()
	defer e.leaderMu.Unlock()
	return e.leader
}

func (e *Elector) setLeader(identity string) {
	e.leaderMu.Lock()
	e.leader = identity
	e.leaderMu.Unlock()
}

// Healthy returns an error wrapping ErrRenewDeadlineMissed while this elector still
// believes it holds a term but its last successful renew is older than RenewDeadline
// (the election goroutine is stuck), and nil otherwise. Meant for a /healthz check.
func (e *Elector) Healthy() error {
	t := e.current.Load()
	if t == nil || t.renewDeadline == 0 {
		return nil
	}
	if d := t.sinceRenew(); d >= t.renewDeadline {
		return fmt.Errorf("%w: last renew %v ago, deadline %v", ErrRenewDeadlineMissed, d, t.renewDeadline)
	}
	return nil
}

// Start campaigns for the lease, leads while it holds it and campaigns again when it
// loses it, until ctx ends. It then ends a running term, waits for the OnStartedLeading
// goroutines, releases the lease if ReleaseOnCancel is set and this elector still holds
// it, waits for the OnNewLeader goroutine, and returns nil, or the error of a failed
// release. A second call returns ErrAlreadyStarted.
func (e *Elector) Start(ctx context.Context) error {
	if !e.started.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	defer e.wg.Wait()
	var n *notifier
	if e.callbacks.OnNewLeader != nil {
		n = newNotifier(e.callbacks.OnNewLeader)
		e.wg.Go(n.run)
		defer n.close()
	}
	if e.config.SingleReplica {
		e.leadAlone(ctx, n)
		return nil
	}
	c := &campaign{
		e:            e,
		ctx:          ctx,
		notify:       n,
		watchRetry:   backoff{initial: e.config.RetryPeriod / 16, max: e.config.RetryPeriod, factor: 0.5, rand: e.rand},
		acquireRetry: backoff{initial: e.config.RetryPeriod / 4, max: e.config.RetryPeriod, factor: retryJitterFactor, rand: e.rand},
		renewRetry:   backoff{initial: e.config.RetryPeriod / 4, max: e.config.RetryPeriod, factor: retryJitterFactor, rand: e.rand},
	}
	return c.run()
}

// leadAlone is Start with SingleReplica: one term, numbered 1, until ctx ends.
func (e *Elector) leadAlone(ctx context.Context, n *notifier) {
	t := newTermContext(ctx, 1, time.Now(), 0)
	e.current.Store(t)
	e.setLeader(e.config.Identity)
	if n != nil {
		n.push(e.config.Identity)
	}
	e.logger.Info("leading alone, election disabled", "term", uint64(1))
	defer func() {
		e.current.Store(nil)
		t.end(context.Cause(ctx))
		if f := e.callbacks.OnStoppedLeading; f != nil {
			f()
		}
	}()
	if f := e.callbacks.OnStartedLeading; f != nil {
		e.wg.Go(func() { f(t) })
	}
	<-ctx.Done()
}

// campaign is the state of one Start: it lives on the election goroutine only.
type campaign struct {
	e      *Elector
	ctx    context.Context
	notify *notifier

	// The watch. Opening one runs in a goroutine (a hung List must not stall renews),
	// which reports on opening; it is abandoned (its context cancelled, Start still
	// waits for it) if it takes RenewDeadline. events is nil
	// while no watch is open; when opening is nil too, watchAt is when to open one.
	// stopWatch cancels the open or opening watch.
	opening     chan watchOpen
	events      <-chan LeaseEvent
	stopWatch   context.CancelFunc
	watchOpened time.Time
	watchAt     time.Time
	watchRetry  backoff

	// The observed lease. record is the latest state seen; after a delete it stays the
	// last state seen before it, to judge when its holder's term is surely over.
	// observedAt is the local time record's fields (not just its version) last changed.
	known      bool
	exists     bool
	record     LeaseRecord
	observedAt time.Time
	seen       uint64 // highest resourceVersion seen, 0 if none
	reported   string // last holder reported to OnNewLeader
	// stale is set when a write found the lease changed: wait for the next observation
	// (or, if none came by staleAt, open a new watch) before writing again.
	stale   bool
	staleAt time.Time

	// Our writes. A record is ours while its fields equal one we wrote (or sent).
	wrote      LeaseRecord
	hasWritten bool
	sent       LeaseRecord
	sentAt     time.Time
	hasSent    bool

	// Acquiring: acquireAt is the earliest next attempt after a failed one.
	acquireAt    time.Time
	acquireRetry backoff

	// Leading. work is closed when the last term's OnStartedLeading returned; nil when
	// it did (or none ran).
	term       *termContext
	lastTerm   uint64
	renewAt    time.Time
	renewRetry backoff
	work       chan struct{}
}

func (c *campaign) run() error {
	defer func() {
		// Defer-style end of term: OnStoppedLeading runs even if the loop panics.
		if c.term != nil {
			c.stepDown(context.Cause(c.ctx))
		}
	}()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	c.openWatch()
	for c.ctx.Err() == nil {
		c.step()
		if c.ctx.Err() != nil {
			break
		}
		var wake <-chan time.Time
		if at, ok := c.nextWake(); ok {
			timer.Reset(time.Until(at))
			wake = timer.C
		}
		var termDone <-chan struct{}
		if c.term != nil {
			termDone = c.term.Done()
		}
		select {
		case <-c.ctx.Done():
		case o := <-c.opening:
			c.opened(o)
		case ev, ok := <-c.events:
			if ok {
				c.observe(ev)
			} else {
				c.watchBroke()
			}
		case <-wake:
		case <-termDone:
		case <-c.work:
			c.work = nil
		}
	}
	return c.shutdown()
}

// step does what is due now.
func (c *campaign) step() {
	now := time.Now()
	if c.opening != nil && !now.Before(c.watchOpened.Add(c.e.config.RenewDeadline)) {
		// The store has not answered within RenewDeadline (a black-holed List): give up
		// on this watch, whose goroutine ends with its context, and try again.
		c.e.logger.Warn("watching lease timed out", "after", c.e.config.RenewDeadline)
		c.stopWatch()
		c.opening, c.stopWatch = nil, nil
		c.watchAt = now.Add(c.watchRetry.Next())
	}
	if c.events == nil && c.opening == nil && !now.Before(c.watchAt) {
		c.openWatch()
	}
	if c.term != nil {
		if c.term.Err() != nil {
			cause := context.Cause(c.term)
			c.stepDown(cause)
			c.resigned(cause)
		} else {
			if !now.Before(c.renewAt) {
				c.renew()
			}
			return
		}
	}
	if c.stale && !now.Before(c.staleAt) {
		// A write conflicted but the watch has not shown the newer state within a
		// RetryPeriod: it is stuck. Open a new one, which re-reads the state.
		c.staleAt = now.Add(c.e.config.RetryPeriod)
		if c.events != nil {
			c.e.logger.Info("lease watch silent after a conflict, watching again")
			c.stopWatch()
			c.events, c.stopWatch = nil, nil
			c.watchAt = now
			c.openWatch()
		}
	}
	if at, ok := c.acquireTime(); ok && !time.Now().Before(at) {
		c.acquire()
	}
}

// nextWake is the earliest time step has something to do, not counting events.
func (c *campaign) nextWake() (time.Time, bool) {
	var at time.Time
	ok := false
	consider := func(t time.Time) {
		if !ok || t.Before(at) {
			at, ok = t, true
		}
	}
	if c.opening != nil {
		consider(c.watchOpened.Add(c.e.config.RenewDeadline))
	} else if c.events == nil {
		consider(c.watchAt)
	}
	if c.term != nil {
		consider(c.renewAt)
		return at, ok
	}
	if c.stale {
		consider(c.staleAt)
	}
	if t, can := c.acquireTime(); can {
		consider(t)
	}
	return at, ok
}

// ours reports whether r holds fields this elector wrote, so nobody else wrote the lease
// since: then it may take it back at once.
func (c *campaign) ours(r LeaseRecord) bool {
	if r.HolderIdentity != c.e.config.Identity {
		return false
	}
	return (c.hasWritten && sameSpec(r, c.wrote)) || (c.hasSent && sameSpec(r, c.sent))
}

// leaseDuration is how long the holder of r may go without renewing.
func (c *campaign) leaseDuration(r LeaseRecord) time.Duration {
	if r.LeaseDuration > 0 {
		return r.LeaseDuration
	}
	return c.e.config.LeaseDuration
}

// acquireTime is when a follower may try to take the lease; ok is false while it may not
// (state unknown or stale, or the last term's leader work still running).
func (c *campaign) acquireTime() (time.Time, bool) {
	if c.term != nil || !c.known || c.stale || c.work != nil {
		return time.Time{}, false
	}
	var at time.Time // zero: now
	if r := c.record; r.HolderIdentity != "" && !c.ours(r) {
		// Held by someone else, or deleted while held: that holder's term ends by its
		// RenewDeadline after its last renew, which we saw at observedAt, well before
		// observedAt + LeaseDuration.
		at = c.observedAt.Add(c.leaseDuration(r))
	}
	if c.acquireAt.After(at) {
		at = c.acquireAt
	}
	return at, true
}

// observe takes in a state of the lease, from the watch, a read or our own write.
func (c *campaign) observe(ev LeaseEvent) {
	if v, ok := parseVersion(ev.Record.ResourceVersion); ok {
		if v < c.seen {
			return // older than what we know, e.g. the late echo of our own write
		}
		c.seen = v
	}
	now := time.Now()
	c.stale = false
	if ev.Deleted {
		if !zeroSpec(ev.Record) && (!c.known || !sameSpec(ev.Record, c.record)) {
			c.record, c.observedAt = ev.Record, now
		}
		c.exists = false
	} else {
		if !c.known || !c.exists || !sameSpec(ev.Record, c.record) {
			c.observedAt = now
		}
		c.record, c.exists = ev.Record, true
	}
	c.known = true

	holder := ""
	if c.exists {
		holder = c.record.HolderIdentity
	}
	c.e.setLeader(holder)
	if holder != c.reported {
		c.reported = holder
		if holder != "" && c.notify != nil {
			c.notify.push(holder)
		}
	}

	if c.term == nil {
		return
	}
	switch {
	case c.exists && sameSpec(c.record, c.wrote):
		c.wrote.ResourceVersion = c.record.ResourceVersion // our write, or only metadata changed since
	case c.exists && c.hasSent && sameSpec(c.record, c.sent) && c.record.HolderIdentity == c.e.config.Identity:
		// A renew whose answer we missed went through.
		c.wrote, c.hasWritten = c.record, true
		c.term.markRenewed(c.sentAt)
	default:
		c.e.logger.Info("lease lost", "holder", holder, "deleted", !c.exists, "term", c.term.term)
		c.stepDown(ErrLeaseLost)
	}
}

// refresh reads the lease (outside the watch) and observes it.
func (c *campaign) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.e.config.RenewDeadline)
	defer cancel()
	r, err := c.e.store.Get(ctx)
	switch {
	case err == nil:
		c.observe(LeaseEvent{Record: r})
	case errors.Is(err, ErrLeaseNotFound):
		c.observe(LeaseEvent{Deleted: true})
	default:
		return err
	}
	return nil
}

func (c *campaign) markStale() {
	c.stale = true
	c.staleAt = time.Now().Add(c.e.config.RetryPeriod)
}

func (c *campaign) markSent(r LeaseRecord, at time.Time) {
	c.sent, c.sentAt, c.hasSent = r, at, true
}

func (c *campaign) markWritten(r LeaseRecord) {
	c.wrote, c.hasWritten = r, true
	c.observe(LeaseEvent{Record: r})
}

// wallClock is the time written to the lease: wall clock only, to the microsecond
// that a Kubernetes MicroTime keeps.
func wallClock(t time.Time) time.Time { return t.Truncate(time.Microsecond) }

// acquire tries to take the lease with a compare-and-swap on the observed version.
func (c *campaign) acquire() {
	cfg := c.e.config
	sentAt := time.Now()
	r := LeaseRecord{
		HolderIdentity: cfg.Identity,
		LeaseDuration:  cfg.LeaseDuration,
		AcquireTime:    wallClock(sentAt),
		RenewTime:      wallClock(sentAt),
	}
	ctx, cancel := context.WithTimeout(c.ctx, cfg.RenewDeadline)
	defer cancel()
	var out LeaseRecord
	var err error
	if c.exists {
		prev := c.record
		r.LeaseTransitions = prev.LeaseTransitions
		if prev.HolderIdentity != cfg.Identity {
			r.LeaseTransitions++
		}
		r.ResourceVersion = prev.ResourceVersion
		c.markSent(r, sentAt)
		out, err = c.e.store.Update(ctx, r)
	} else {
		c.markSent(r, sentAt)
		out, err = c.e.store.Create(ctx, r)
	}
	switch {
	case err == nil:
		c.acquireRetry.Reset()
		c.markWritten(out)
		term, err := parseTerm(out.ResourceVersion)
		if err == nil && term <= c.lastTerm {
			err = fmt.Errorf("%w: %d is not above the previous term %d", ErrInvalidTerm, term, c.lastTerm)
		}
		if err != nil {
			c.e.logger.Error("refusing to lead", "error", err)
			if rerr := c.release(); rerr != nil {
				c.e.logger.Error("releasing lease failed", "error", rerr)
			}
			c.acquireAt = time.Now().Add(c.acquireRetry.Next())
			return
		}
		c.startTerm(term, sentAt)
	case errors.Is(err, ErrConflict), errors.Is(err, ErrLeaseNotFound):
		c.markStale() // someone else wrote first; the watch shows what
	case c.ctx.Err() != nil:
	default:
		c.e.logger.Warn("acquiring lease failed", "error", err)
		c.acquireAt = time.Now().Add(c.acquireRetry.Next())
	}
}

// renew extends the term with a compare-and-swap on our last write. The call runs under
// the term context, so it is abandoned when the renew deadline passes.
func (c *campaign) renew() {
	sentAt := time.Now()
	r := c.wrote
	r.RenewTime = wallClock(sentAt)
	r.LeaseDuration = c.e.config.LeaseDuration
	c.markSent(r, sentAt)
	out, err := c.e.store.Update(c.term, r)
	switch {
	case err == nil:
		c.markWritten(out)
		if c.term != nil && c.term.markRenewed(sentAt) {
			c.renewAt = sentAt.Add(c.e.config.RetryPeriod)
			c.renewRetry.Reset()
		}
	case errors.Is(err, ErrConflict):
		// Someone wrote the lease: if only its metadata changed, observe adopts the new
		// version and we renew again at once; otherwise it ends the term.
		stale := c.wrote.ResourceVersion
		rerr := c.refresh(c.term)
		switch {
		case c.term == nil: // lost
		case rerr != nil || c.wrote.ResourceVersion == stale:
			c.renewAt = time.Now().Add(c.renewRetry.Next())
		default:
			c.renewAt = time.Now()
		}
	case errors.Is(err, ErrLeaseNotFound):
		c.observe(LeaseEvent{Deleted: true})
	default:
		if c.term.Err() == nil {
			c.e.logger.Warn("renewing lease failed", "error", err, "term", c.term.term)
			c.renewAt = time.Now().Add(c.renewRetry.Next())
		}
	}
}

// startTerm begins leading under term, whose acquiring write was sent at sentAt.
func (c *campaign) startTerm(term uint64, sentAt time.Time) {
	t := newTermContext(c.ctx, term, sentAt, c.e.config.RenewDeadline)
	c.term, c.lastTerm = t, term
	c.renewAt = sentAt.Add(c.e.config.RetryPeriod)
	c.renewRetry.Reset()
	c.e.current.Store(t)
	c.e.logger.Info("became leader", "term", term)
	done := make(chan struct{})
	c.work = done
	f := c.e.callbacks.OnStartedLeading
	c.e.wg.Go(func() {
		defer close(done)
		if f != nil {
			f(t)
		}
	})
}

// stepDown ends the current term with cause and calls OnStoppedLeading.
func (c *campaign) stepDown(cause error) {
	t := c.term
	c.term = nil
	c.e.current.Store(nil)
	t.end(cause)
	c.e.logger.Info("stopped leading", "term", t.term, "cause", context.Cause(t))
	if f := c.e.callbacks.OnStoppedLeading; f != nil {
		f()
	}
}

// release clears the holder of a lease that is still ours, as client-go does (holder
// "", leaseDurationSeconds 1, both times now), with a compare-and-swap.
func (c *campaign) release() error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), c.e.config.RenewDeadline)
	defer cancel()
	for attempt := 0; attempt < 2; attempt++ {
		if !c.exists || !c.ours(c.record) {
			return nil // not ours any more: nothing to release
		}
		now := wallClock(time.Now())
		r := c.record
		r.HolderIdentity = ""
		r.LeaseDuration = time.Second
		r.AcquireTime, r.RenewTime = now, now
		c.markSent(r, now)
		out, err := c.e.store.Update(ctx, r)
		switch {
		case err == nil:
			c.markWritten(out)
			c.e.logger.Info("released lease")
			return nil
		case errors.Is(err, ErrConflict):
			if err := c.refresh(ctx); err != nil {
				return fmt.Errorf("leaderelection: release %s: %w", c.e.store, err)
			}
		case errors.Is(err, ErrLeaseNotFound):
			return nil
		default:
			return fmt.Errorf("leaderelection: release %s: %w", c.e.store, err)
		}
	}
	return nil
}

// watchOpen is the outcome of LeaseStore.Watch.
type watchOpen struct {
	events <-chan LeaseEvent
	err    error
}

// openWatch starts opening a watch of the lease; opened takes the outcome.
func (c *campaign) openWatch() {
	ctx, cancel := context.WithCancel(c.ctx)
	opening := make(chan watchOpen, 1) // never blocks the goroutine
	c.opening, c.stopWatch = opening, cancel
	c.watchOpened = time.Now()
	c.e.wg.Go(func() {
		events, err := c.e.store.Watch(ctx)
		opening <- watchOpen{events: events, err: err}
	})
}

// opened takes the outcome of openWatch; on failure it schedules another try.
func (c *campaign) opened(o watchOpen) {
	c.opening = nil
	if o.err != nil {
		c.stopWatch()
		c.stopWatch = nil
		if c.ctx.Err() == nil {
			c.e.logger.Warn("watching lease failed", "error", o.err)
		}
		c.watchAt = time.Now().Add(c.watchRetry.Next())
		return
	}
	c.events = o.events
	c.watchOpened = time.Now()
}

// watchBroke schedules a new watch after the store closed the channel. A watch that
// lasted a RetryPeriod resets the backoff.
func (c *campaign) watchBroke() {
	c.stopWatch()
	c.events, c.stopWatch = nil, nil
	now := time.Now()
	if now.Sub(c.watchOpened) >= c.e.config.RetryPeriod {
		c.watchRetry.Reset()
	}
	c.watchAt = now.Add(c.watchRetry.Next())
	c.e.logger.Debug("lease watch closed", "retry", c.watchAt.Sub(now))
}

// shutdown ends the term, closes the watch, waits for leader work and releases.
func (c *campaign) shutdown() error {
	if c.term != nil {
		c.stepDown(context.Cause(c.ctx))
	}
	if c.stopWatch != nil {
		c.stopWatch()
	}
	if c.opening != nil {
		c.opened(<-c.opening)
	}
	if c.events != nil {
		for ev := range c.events { // until the store closed it: its goroutine is done
			c.observe(ev)
		}
		c.events = nil
	}
	if c.work != nil {
		<-c.work
		c.work = nil
	}
	if c.e.config.ReleaseOnCancel {
		return c.release()
	}
	return nil
}
