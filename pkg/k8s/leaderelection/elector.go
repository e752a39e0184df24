package leaderelection

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/termctx"
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
	clock     Clock          // Config.Clock, or the real clock

	started atomic.Bool
	// mayCampaign is whether the elector may make acquiring writes (Config.FollowOnly,
	// SetCampaigning); campaignChanged wakes the election goroutine after it changed,
	// or after Config.Liveness's answers did (LivenessChanged) (room for one, so that
	// neither ever blocks).
	mayCampaign     atomic.Bool
	campaignChanged chan struct{}
	// synced is closed once the lease was first observed; syncOnce closes it.
	synced   chan struct{}
	syncOnce sync.Once
	// current is the term being led, nil while following. Written by the election
	// goroutine only.
	current atomic.Pointer[termContext]
	// wg counts the OnStartedLeading, OnNewLeader, watch-opening and watch-draining
	// goroutines.
	wg sync.WaitGroup
	// handovers carries HandOver requests to the election goroutine; done is closed when
	// the election goroutine no longer takes them.
	handovers chan handoverRequest
	done      chan struct{}

	// Counters of Stats.
	watches, watchErrors, versionResets, handOvers, slowAcquires, outOfRange, duplicateIdentity, deathTakeovers, handedOffTerms atomic.Uint64

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
	e := &Elector{
		config:          config,
		store:           store,
		callbacks:       callbacks,
		logger:          logger.With(attrs...),
		rand:            jitterOf(config),
		clock:           clockOf(config),
		handovers:       make(chan handoverRequest),
		done:            make(chan struct{}),
		campaignChanged: make(chan struct{}, 1),
		synced:          make(chan struct{}),
	}
	e.mayCampaign.Store(!config.FollowOnly)
	return e
}

// jitterOf returns the jitter source of config: Config.JitterSource, or the global
// source when it is nil.
func jitterOf(config Config) func() float64 {
	if config.JitterSource == nil {
		return rand.Float64
	}
	return rand.New(config.JitterSource).Float64
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
		return t.Term()
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

// SetCampaigning lets the elector campaign (true) or makes it follow only (false),
// from now until the next call; Config.FollowOnly sets the state before the first.
// While it only follows, the elector keeps watching the lease and judging its holder
// as usual, but makes no acquiring write, except to take a lease handed over to it (a
// release naming it preferredHolder). Allowed again, it acquires as soon as what it
// has followed allows, at once for a lease it saw released, absent since its first
// look, or held by a holder that expired or was proven dead meanwhile: following
// counts as looking, and only a genuinely first look (or one after a gap in the
// watch) waits as the first-look rules say. It does not end a term under way (use
// HandOver or Resign). It never blocks, and may be called before Start.
func (e *Elector) SetCampaigning(on bool) {
	if e.mayCampaign.Swap(on) != on {
		select {
		case e.campaignChanged <- struct{}{}:
		default:
		}
	}
}

// Synced returns a channel that is closed once the elector has observed the lease
// for the first time after Start (its first watch's list, or a read): from then on
// it knows the lease's state, e.g. takes a hand-over to it at once. With
// SingleReplica it is closed by Start.
func (e *Elector) Synced() <-chan struct{} { return e.synced }

// markSynced closes synced, once.
func (e *Elector) markSynced() { e.syncOnce.Do(func() { close(e.synced) }) }

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
	defer close(e.done)
	var n *notifier
	if e.callbacks.OnNewLeader != nil {
		n = newNotifier(e.callbacks.OnNewLeader)
		e.wg.Go(n.run)
		defer n.close()
	}
	if e.config.SingleReplica {
		e.markSynced()
		e.leadAlone(ctx, n)
		return nil
	}
	c := &campaign{
		e:            e,
		ctx:          ctx,
		notify:       n,
		self:         e.config.Identity,
		marker:       holderMarker(e.config.Identity),
		acquireRetry: backoff{initial: e.config.RetryPeriod / 4, max: e.config.RetryPeriod, factor: retryJitterFactor, rand: e.rand},
		renewRetry:   backoff{initial: e.config.RetryPeriod / 4, max: e.config.RetryPeriod, factor: retryJitterFactor, rand: e.rand},
	}
	c.watch.backoff = backoff{initial: e.config.RetryPeriod / 16, max: e.config.RetryPeriod, factor: 0.5, rand: e.rand}
	return c.run()
}

// leadAlone is Start with SingleReplica: one term, numbered 1, until ctx ends.
func (e *Elector) leadAlone(ctx context.Context, n *notifier) {
	t := newTermContext(ctx, termctx.Term{Number: 1}, e.clock.Now(), 0, e.clock)
	e.current.Store(t)
	e.setLeader(e.config.Identity)
	if n != nil {
		n.push(e.config.Identity)
	}
	e.logger.Info("leading alone, election disabled", "term", uint64(1))
	defer func() {
		t.end(context.Cause(ctx))
		e.current.Store(nil)
		if f := e.callbacks.OnStoppedLeading; f != nil {
			f()
		}
	}()
	if f := e.callbacks.OnStartedLeading; f != nil {
		e.wg.Go(func() { f(t) })
	}
	<-ctx.Done()
}

// Stats are counters of an Elector since it was created, for metrics and tests. Each is
// a uint64 that grows by one per event: it does not wrap in any realistic lifetime.
type Stats struct {
	// Watches counts the watches opened; each starts with a list of the lease.
	Watches uint64
	// WatchErrors counts the errors a watch reported (e.g. 410 Gone), each logged and
	// followed by a new watch.
	WatchErrors uint64
	// VersionResets counts the times the lease's resourceVersion was seen going back
	// (an etcd restore, a stale API server): each ended a running term and made the
	// elector wait as for an unknown holder.
	VersionResets uint64
	// HandOvers counts the terms this elector ended to hand the lease over.
	HandOvers uint64
	// SlowAcquires counts the acquiring Creates that may have landed after states of
	// the lease this elector never saw: answered more than a RetryPeriod after they
	// were sent, or with the watch showing another state before their own. Each held the
	// lease a LeaseDuration from its answer before its term began (or gave the term
	// up). See docs/design/leaderelection.md, # Slow acquiring writes.
	SlowAcquires uint64
	// OutOfRange counts the values read from the Lease outside the range Baton itself
	// writes, each logged at WARN, once per record: see docs/design/leaderelection.md, # Values from
	// the cluster.
	OutOfRange uint64
	// DuplicateIdentity counts the writes of the lease that named this elector as
	// holder but were not its own: another candidate runs with the same identity.
	// Each is logged at ERROR. Identities must be unique (Config.Identity).
	DuplicateIdentity uint64
	// DeathTakeovers counts the terms this elector started by taking the lease from a
	// holder proven dead (Config.DeathWatch) before the lease expired: crash failovers
	// made on the kubelet's report rather than by waiting the lease out.
	DeathTakeovers uint64
	// HandedOffTerms counts the terms this elector started on a one-write hand-over to
	// it (HandOffs), without a write of its own.
	HandedOffTerms uint64
}

// Stats returns the elector's counters.
func (e *Elector) Stats() Stats {
	return Stats{
		Watches:           e.watches.Load(),
		WatchErrors:       e.watchErrors.Load(),
		VersionResets:     e.versionResets.Load(),
		HandOvers:         e.handOvers.Load(),
		SlowAcquires:      e.slowAcquires.Load(),
		OutOfRange:        e.outOfRange.Load(),
		DuplicateIdentity: e.duplicateIdentity.Load(),
		DeathTakeovers:    e.deathTakeovers.Load(),
		HandedOffTerms:    e.handedOffTerms.Load(),
	}
}

// handoverRequest asks the election goroutine to hand the lease to target; the outcome
// is sent on reply (buffered), when the release was written or failed.
type handoverRequest struct {
	target string
	reply  chan error
}

// HandOver ends this elector's term and releases the lease naming identity as its
// preferredHolder, so that candidate takes the lease at once on the release's watch
// event, while the other candidates wait a LeaseDuration for it. It returns once the
// release was written, after the term's OnStartedLeading returned (the term context is
// cancelled with cause ErrHandedOver). This elector then follows, as after any
// release. It returns an error wrapping ErrInvalidHandOver for an empty identity or
// this elector's own, ErrNotLeader when it does not lead (before Start, after it
// returned, or while following), ErrLeaseLost when the lease was taken before the
// release, ctx's error when ctx ends first (the hand-over then still completes), or
// the store's error of a failed release.
func (e *Elector) HandOver(ctx context.Context, identity string) error {
	if identity == "" || identity == e.config.Identity {
		return fmt.Errorf("%w: %q", ErrInvalidHandOver, identity)
	}
	if e.config.SingleReplica || e.current.Load() == nil {
		return ErrNotLeader
	}
	req := handoverRequest{target: identity, reply: make(chan error, 1)}
	select {
	case e.handovers <- req:
	case <-e.done:
		return ErrNotLeader
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
