package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-dev/baton/pkg/controller/configchange"
	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/deploymentscheduler"
	"github.com/baton-dev/baton/pkg/controller/discovery"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leaderelection"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	"github.com/baton-dev/baton/pkg/controller/metrics"
	refmetrics "github.com/baton-dev/baton/pkg/controller/metrics/reference"
	"github.com/baton-dev/baton/pkg/controller/reconciler"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/fence"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/termctx"
)

// Term hook names, in the order they run at the start of a term.
const (
	HookConfig    = "config"
	HookPods      = "pods"
	HookReconcile = "reconcile"
)

// Replica is one Baton controller process's worth of components. Create
// it with New; run it with Run.
type Replica struct {
	identity    string
	logger      *slog.Logger
	stopTimeout time.Duration
	hooks       Hooks

	bus         *busevents.EventBus
	elector     *leaderelection.Component
	manager     *lifecycle.Manager
	config      *configchange.ConfigChangeHandler
	discovery   *discovery.Discovery
	reconciler  *reconciler.Reconciler
	publisher   *configpublisher.Component
	scheduler   *deploymentscheduler.Component
	coordinator *reconciler.Coordinator
	metrics     *metrics.Metrics

	started atomic.Bool
	done    chan struct{} // closed when Run returns
}

// New builds a replica in the order the package documentation gives. Its
// errors name the offending option or wrap the constructor's error that
// refused it.
func New(opts Options) (_ *Replica, err error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	r := newReplica(opts)
	// 1. The bus, not started. Stopping it undoes the subscriptions made
	// below if a later step fails.
	capacity := opts.BusCapacity
	if capacity == 0 {
		capacity = DefaultBusCapacity
	}
	r.bus = busevents.NewEventBusWithLogger(capacity, r.logger)
	defer func() {
		if err != nil {
			r.bus.Stop()
		}
	}()
	for _, step := range []func(Options) error{r.buildCore, r.buildAllReplica, r.buildLeaderOnly, r.register, r.buildMetrics} {
		if err := step(opts); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// newReplica returns the replica's shell, defaults applied.
func newReplica(opts Options) *Replica {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	stop := opts.StopTimeout
	if stop == 0 {
		stop = lifecycle.DefaultStopTimeout
	}
	return &Replica{
		identity:    opts.Election.Identity,
		logger:      logger.With("replica", opts.Election.Identity),
		stopTimeout: stop,
		hooks:       opts.Hooks,
		done:        make(chan struct{}),
	}
}

// holdsLease reads the Lease from leases, for the publisher's check of a stamp of no
// term: this replica holds it in term while it is the holder and its term, carried by
// the publisher's context, has not ended.
func holdsLease(leases k8sle.LeaseStore, identity string) configpublisher.HoldsLease {
	if leases == nil {
		return nil
	}
	return func(ctx context.Context, term uint64) (bool, error) {
		rec, err := leases.Get(ctx)
		if err != nil {
			return false, err
		}
		current, ok := termctx.FromContext(ctx)
		return rec.HolderIdentity == identity && ok && current == term && ctx.Err() == nil, nil
	}
}

// leaseToken reads the Lease from leases, for the publisher's stamp of the term's
// token (the API server's fence): this replica's holder and acquireTime while it holds
// the Lease in term, else an error wrapping configpublisher.ErrStaleTerm.
func leaseToken(leases k8sle.LeaseStore, identity, lease string) configpublisher.LeaseToken {
	if leases == nil {
		return nil
	}
	return func(ctx context.Context, term uint64) (string, fence.Token, error) {
		rec, err := leases.Get(ctx)
		if err != nil {
			return "", fence.Token{}, err
		}
		current, ok := termctx.FromContext(ctx)
		if rec.HolderIdentity != identity || !ok || current != term || ctx.Err() != nil {
			return "", fence.Token{}, fmt.Errorf("%w: the Lease %s is not held by %s in term %d", configpublisher.ErrStaleTerm, leases, identity, term)
		}
		return lease, fence.Token{Holder: rec.HolderIdentity, Acquired: rec.AcquireTime}, nil
	}
}

// buildCore builds the election adapter and the runtime.
func (r *Replica) buildCore(opts Options) (err error) {
	// 2. The election adapter, on the observed lease store.
	var leases k8sle.LeaseStore
	if opts.LeaseStore != nil {
		leases = &leaseObserver{inner: opts.LeaseStore, identity: r.identity, onTakeover: r.takeover}
	}
	r.elector, err = leaderelection.NewWithStore(opts.Election, leases, r.bus, leaderelection.Callbacks{
		OnStartedLeading: opts.Hooks.OnStartedLeading,
		OnStoppedLeading: opts.Hooks.OnStoppedLeading,
		OnNewLeader:      opts.Hooks.OnNewLeader,
	}, r.logger)
	if err != nil {
		return fmt.Errorf("app: election: %w", err)
	}

	// 3. The runtime, before the bus starts.
	stepDown := r.elector.Resign
	if opts.NoStepDown {
		stepDown = nil
	}
	r.manager, err = lifecycle.NewManager(r.bus, lifecycle.Options{
		Logger:           r.logger,
		StopTimeout:      opts.StopTimeout,
		SubscribeTimeout: opts.SubscribeTimeout,
		TermContext:      r.elector.TermContext,
		StepDownGrace:    opts.StepDownGrace,
		CampaignUnsynced: opts.CampaignUnsynced,
		StepDown:         stepDown,
		OnTermReady:      r.termReady,
		OnTermStopped:    opts.Hooks.OnTermStopped,
	})
	if err != nil {
		return fmt.Errorf("app: runtime: %w", err)
	}
	return nil
}

// buildAllReplica builds the all-replica components; those that consume
// events subscribe in their constructor.
func (r *Replica) buildAllReplica(opts Options) (err error) {
	// 4. All-replica components.
	if r.config, err = configchange.New(r.bus, configchange.Options{Source: opts.ConfigSource, Logger: r.logger}); err != nil {
		return fmt.Errorf("app: %w", err)
	}
	if r.discovery, err = opts.Discovery(r.bus, r.logger); err != nil {
		return fmt.Errorf("app: %w", err)
	}
	if r.discovery == nil {
		return fmt.Errorf("%w: discovery returned nil", ErrInvalidOptions)
	}
	recOpts := opts.Reconciler
	if recOpts.Logger == nil {
		recOpts.Logger = r.logger
	}
	if r.reconciler, err = reconciler.NewReconciler(r.bus, recOpts); err != nil {
		return fmt.Errorf("app: %w", err)
	}
	return nil
}

// buildLeaderOnly builds the leader-only components; each subscribes in
// Start, per term.
func (r *Replica) buildLeaderOnly(opts Options) (err error) {
	// 5. Leader-only components.
	content := opts.PublisherContent
	if content == nil {
		content = configpublisher.RenderedContent{}
	}
	if r.publisher, err = configpublisher.New(r.bus, configpublisher.Options{
		Store:         opts.Published,
		Identity:      r.identity,
		Content:       content,
		RetryInterval: opts.PublisherRetry,
		OnWrite:       opts.Hooks.OnPublish,
		Logger:        r.logger,
		HoldsLease:    holdsLease(opts.LeaseStore, r.identity),
		LeaseToken:    leaseToken(opts.LeaseStore, r.identity, opts.Election.LeaseName),
	}); err != nil {
		return fmt.Errorf("app: %w", err)
	}
	schedOpts := opts.Scheduler
	if schedOpts.Logger == nil {
		schedOpts.Logger = r.logger
	}
	if r.scheduler, err = deploymentscheduler.New(r.bus, schedOpts); err != nil {
		return fmt.Errorf("app: %w", err)
	}
	coordOpts := opts.Coordinator
	if coordOpts.Logger == nil {
		coordOpts.Logger = r.logger
	}
	if coordOpts.Latest == nil {
		// Runs start from the newest state the all-replica side handed out.
		coordOpts.Latest = func() (*events.ConfigValidatedEvent, *events.HAProxyPodsDiscoveredEvent) {
			cfg, _ := r.config.Current()
			pods, _ := r.discovery.Current()
			return cfg, pods
		}
	}
	if r.coordinator, err = reconciler.NewCoordinator(r.bus, coordOpts); err != nil {
		return fmt.Errorf("app: %w", err)
	}
	return nil
}

// register hands the components, replayers and term hooks to the runtime.
func (r *Replica) register(opts Options) error {
	adds := []error{
		r.manager.AddCampaigner(r.elector), // campaigns once config and pods were read
		r.manager.AddAllReplica(r.config),
		r.manager.AddAllReplica(r.discovery),
		r.manager.AddAllReplica(r.reconciler),
		r.manager.AddLeaderOnly(r.publisher),
		r.manager.AddLeaderOnly(r.scheduler),
		r.manager.AddLeaderOnly(r.coordinator),
		// 6. Replayers first, then the fresh reconciliation.
		r.manager.AddReplayer(HookConfig, r.observed(HookConfig, r.config.Replayer())),
		r.manager.AddReplayer(HookPods, r.observed(HookPods, r.discovery.Replayer())),
		r.manager.AddTermHook(HookReconcile, r.reconciler.TriggerNow),
	}
	if opts.AllReplica != nil {
		extra, err := opts.AllReplica(r)
		if err != nil {
			return fmt.Errorf("app: all-replica components: %w", err)
		}
		for _, c := range extra {
			adds = append(adds, r.manager.AddAllReplica(c))
		}
	}
	if opts.LeaderOnly != nil {
		extra, err := opts.LeaderOnly(r)
		if err != nil {
			return fmt.Errorf("app: leader-only components: %w", err)
		}
		for _, c := range extra {
			// inventory: caller-supplied (Options.LeaderOnly), not listed in
			// the project's leader-only inventory.
			adds = append(adds, r.manager.AddLeaderOnly(c))
		}
	}
	if err := errors.Join(adds...); err != nil {
		return fmt.Errorf("app: register: %w", err)
	}
	return nil
}

// buildMetrics builds the metrics, read at scrape time: the core's (bus,
// election, runtime) and the reference controller's own.
func (r *Replica) buildMetrics(opts Options) (err error) {
	// 7. Metrics.
	own := refmetrics.NewCollector(refmetrics.Sources{Config: r.config, Publisher: r.publisher})
	if r.metrics, err = metrics.New(metrics.Sources{
		Bus: r.bus, Runtime: r.manager, Election: r.elector.Elector(),
		ElectionCounters: func() metrics.ElectionCounters {
			s := r.elector.Elector().Stats()
			return metrics.ElectionCounters{OutOfRange: s.OutOfRange, DuplicateIdentity: s.DuplicateIdentity, DeathTakeovers: s.DeathTakeovers}
		},
	}, metrics.Options{ProcessMetrics: opts.ProcessMetrics, Collectors: []prometheus.Collector{own}}); err != nil {
		return fmt.Errorf("app: %w", err)
	}
	return nil
}

func (r *Replica) takeover(prev, acquired k8sle.LeaseRecord) {
	if !prev.RenewTime.IsZero() {
		d := acquired.AcquireTime.Sub(prev.RenewTime)
		r.metrics.ObserveHandover(d)
		r.logger.LogAttrs(context.Background(), slog.LevelInfo, "took over the lease", // once per term: no attribute allocations
			slog.String("previous_holder", prev.HolderIdentity), slog.Duration("handover", d))
	}
	if f := r.hooks.OnTakeover; f != nil {
		f(prev, acquired)
	}
}

func (r *Replica) termReady(rep lifecycle.TermReport) {
	r.metrics.ObserveTermReady(rep.Latency)
	if f := r.hooks.OnTermReady; f != nil {
		f(rep)
	}
}

// observed wraps a replayer to call Hooks.OnReplay.
func (r *Replica) observed(name string, rp lifecycle.Replayer) lifecycle.Replayer {
	return replayerFunc(func() bool {
		ok := rp.Replay()
		if f := r.hooks.OnReplay; f != nil {
			f(name, ok)
		}
		return ok
	})
}

type replayerFunc func() bool

func (f replayerFunc) Replay() bool { return f() }

// Run starts the bus and runs the components until ctx ends, then stops
// the bus. It returns nil after a clean stop, ErrStopIncomplete (wrapped)
// when components were still running StopTimeout after the bus stopped,
// the Manager's error if it failed, and ErrAlreadyRunning when called
// twice.
func (r *Replica) Run(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer close(r.done)
	r.bus.Start()
	r.logger.Info("replica starting", "identity", r.identity)
	err := r.manager.Run(ctx)
	// Components that overstayed the Manager's stop may be waiting on a
	// subscription; stopping the bus closes them.
	r.bus.Stop()
	t := time.NewTimer(r.stopTimeout)
	defer t.Stop()
	select {
	case <-r.manager.Done():
	case <-t.C:
		var names []string
		for _, c := range r.manager.Status().Components {
			if c.State == lifecycle.StateOverstaying || c.State == lifecycle.StateStopping {
				names = append(names, c.Name)
			}
		}
		err = errors.Join(err, fmt.Errorf("%w: %s", ErrStopIncomplete, strings.Join(names, ", ")))
	}
	r.logger.Info("replica stopped", "identity", r.identity, "error", err)
	return err
}

// Close releases a replica that was never run: it stops the bus, which
// ends the subscriptions the constructors made (and their goroutines), and
// closes Done's channel; Run then returns ErrAlreadyRunning. Once Run was
// called, Close does nothing: Run stops the bus itself.
func (r *Replica) Close() {
	if r.started.CompareAndSwap(false, true) {
		r.bus.Stop()
		close(r.done)
	}
}

// Done returns a channel closed when Run has returned (or Close released a
// replica that never ran).
func (r *Replica) Done() <-chan struct{} { return r.done }

// Healthy returns nil while the replica can do its job, else the reasons:
// the elector holds the lease but missed its renew deadline, or the runtime
// reports a failed component. It backs /healthz.
func (r *Replica) Healthy() error {
	return metrics.Sources{Election: r.elector.Elector(), Runtime: r.manager}.Healthy()
}

// Ready returns nil once the all-replica side has synced: the runtime runs,
// a valid configuration is in force and the first pod set was published;
// and, while this replica leads, as long as its term misses no leader-only
// component (lifecycle.Status.Missing). Otherwise the error wraps
// ErrNotReady and says what is missing. It backs /readyz.
func (r *Replica) Ready() error {
	var missing []string
	st := r.manager.Status()
	if !st.Running {
		missing = append(missing, "runtime not running")
	}
	switch _, ok := r.config.Current(); {
	case ok:
	case !r.config.Synced():
		missing = append(missing, "configuration not read yet")
	default:
		missing = append(missing, "no valid configuration yet: "+r.config.Stats().LastInvalidReason)
	}
	if !r.discovery.Synced() {
		missing = append(missing, "pods not discovered yet")
	}
	if st.Leading && len(st.Missing) > 0 {
		missing = append(missing, fmt.Sprintf("leading term %d without leader-only %s", st.Term, strings.Join(st.Missing, ", ")))
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrNotReady, strings.Join(missing, "; "))
}

// Handler serves /metrics, /healthz and /readyz.
func (r *Replica) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", r.metrics.Handler())
	mux.Handle("GET /healthz", metrics.CheckHandler(r.Healthy))
	mux.Handle("GET /readyz", metrics.CheckHandler(r.Ready))
	return mux
}

// Identity returns the replica's identity (its lease holder name).
func (r *Replica) Identity() string { return r.identity }

// Bus returns the replica's event bus. Subscriptions made before Run are
// all-replica ones: they see every event from the start.
func (r *Replica) Bus() *busevents.EventBus { return r.bus }

// Manager returns the controller runtime.
func (r *Replica) Manager() *lifecycle.Manager { return r.manager }

// Elector returns the election adapter.
func (r *Replica) Elector() *leaderelection.Component { return r.elector }

// ConfigHandler returns the all-replica ConfigChangeHandler.
func (r *Replica) ConfigHandler() *configchange.ConfigChangeHandler { return r.config }

// Discovery returns the all-replica Discovery.
func (r *Replica) Discovery() *discovery.Discovery { return r.discovery }

// Reconciler returns the all-replica Reconciler.
func (r *Replica) Reconciler() *reconciler.Reconciler { return r.reconciler }

// Publisher returns the leader-only ConfigPublisher.
func (r *Replica) Publisher() *configpublisher.Component { return r.publisher }

// Scheduler returns the leader-only DeploymentScheduler.
func (r *Replica) Scheduler() *deploymentscheduler.Component { return r.scheduler }

// Coordinator returns the leader-only Coordinator.
func (r *Replica) Coordinator() *reconciler.Coordinator { return r.coordinator }

// Metrics returns the replica's metrics.
func (r *Replica) Metrics() *metrics.Metrics { return r.metrics }
