package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/baton-dev/baton/pkg/controller/leaderelection"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/k8s/incarnation"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/termctx"
)

// busCapacity is how many events the bus holds before it is started.
const busCapacity = 1024

// Runtime runs Baton's election and term runtime inside a controller-runtime manager.
// New adds it to the manager as a runnable that every replica runs; it campaigns, runs
// the leader-only work of each term, and campaigns again when the term ends. Its
// methods are safe for concurrent use.
type Runtime struct {
	mgr      manager.Manager
	wrapped  *runtimeManager // mgr as Manager hands it to the builders
	logger   logr.Logger
	bus      *busevents.EventBus
	life     *lifecycle.Manager        // nil without the single-leader election
	elector  *leaderelection.Component // nil without it (Options.LeaderElectionID empty)
	metrics  *collector
	identity string
	slogger  *slog.Logger
	// stopTimeout is Options.GracefulShutdownTimeout: the overstay bound of
	// leader-only work, the single leader's and each shard's.
	stopTimeout time.Duration
	// deaths watches lease holders' pods for the death signal; nil when it is off
	// (Options.DeathSignal). incarnation is this run's, "" when it is off.
	deaths      *incarnation.Watcher
	incarnation string

	// lease reads this replica's Lease for the fenced clients (nil without the
	// single-leader election); shardLeases its shard Leases (termctx.Lease to
	// *leaseReader), each added when this replica first leads it (leaseOf);
	// serverSide is Options.ServerSideFence.
	lease       *leaseReader
	shardLeases sync.Map
	serverSide  bool
	// events records the changes of hands of the single Lease (nil without it).
	events *leaseEvents

	// before are the controllers controller-runtime's registry listed when New
	// built this Runtime (strays.go).
	before map[string]bool

	started    atomic.Bool
	warm       atomic.Bool
	leaderOnly atomic.Int32 // controllers and functions registered

	// base is the context Start was given; set before the term runtime runs.
	base atomic.Pointer[context.Context]

	// mu guards names, controllers and sharded.
	mu          sync.Mutex
	names       map[string]bool
	controllers []*controllerComponent
	sharded     []*Sharded
}

// New builds a Runtime for mgr and adds it to mgr: as a runnable that runs on every
// replica, as the health checks HealthzCheckName and ReadyzCheckName, and as metrics on
// Options.MetricsRegisterer. mgr must be built with LeaderElection false: New refuses a
// manager that runs its own election. Register the leader-only work (AddController,
// AddLeaderOnly) and the replayers before mgr.Start. With Options.LeaderElectionID
// empty the Runtime runs no single-leader election: it serves sharded controllers
// (AddShardedController) only, and refuses leader-only work. Errors wrap
// ErrInvalidOptions and name the field to change.
func New(mgr manager.Manager, opts Options) (*Runtime, error) {
	if mgr == nil {
		return nil, fmt.Errorf("%w: manager is nil; pass the manager.Manager the Runtime runs in", ErrInvalidOptions)
	}
	elects, err := checkControllerRuntime(mgr)
	if err != nil {
		return nil, err
	}
	if elects {
		return nil, fmt.Errorf("%w: the manager was built with manager.Options.LeaderElection true; "+
			"set LeaderElection to false (or build the options with Flags.ManagerOptions, which keeps --leader-elect for Baton's election): Baton's Runtime is the election (two would run at once, "+
			"or with one lease name Baton would never lead, and a lost manager lease ends the process)", ErrInvalidOptions)
	}
	s, err := opts.resolve(mgr.GetLogger())
	if err != nil {
		return nil, err
	}
	cs := opts.Clientset
	if cs == nil {
		if cs, err = kubernetes.NewForConfig(mgr.GetConfig()); err != nil {
			return nil, fmt.Errorf("%w: Clientset: building one from the manager's rest config: %v", ErrInvalidOptions, err)
		}
	}
	slogger := toSlog(s.logger)
	deaths, err := opts.deathSignal(&s.election, cs, slogger)
	if err != nil {
		return nil, err
	}
	r := &Runtime{mgr: mgr, logger: s.logger, slogger: slogger, identity: s.election.Identity, names: map[string]bool{}, stopTimeout: s.stop,
		before: runningControllers(),
		deaths: deaths, incarnation: s.election.Incarnation,
		serverSide: opts.ServerSideFence}
	r.wrapped = &runtimeManager{Manager: mgr, rt: r}
	r.bus = busevents.NewEventBusWithLogger(busCapacity, slogger)
	r.metrics = newCollector(r)
	if s.single {
		if err := r.setUpElection(opts, s, cs); err != nil {
			return nil, err
		}
	}
	if err := s.metrics.Register(r.metrics); err != nil {
		return nil, fmt.Errorf("%w: MetricsRegisterer: %v (give each Runtime of a process a registry of its own)", ErrInvalidOptions, err)
	}
	if err := mgr.AddHealthzCheck(HealthzCheckName, r.healthz); err != nil {
		return nil, fmt.Errorf("controllerruntime: adding healthz check: %w", err)
	}
	if err := mgr.AddReadyzCheck(ReadyzCheckName, r.readyz); err != nil {
		return nil, fmt.Errorf("controllerruntime: adding readyz check: %w", err)
	}
	if err := mgr.Add(r); err != nil {
		return nil, fmt.Errorf("controllerruntime: adding the runtime to the manager: %w", err)
	}
	return r, nil
}

// setUpElection builds the single-leader election and its term runtime.
func (r *Runtime) setUpElection(opts Options, s settings, cs kubernetes.Interface) error {
	if r.serverSide {
		if err := labelValue("LeaderElectionID (with ServerSideFence)", s.election.LeaseName); err != nil {
			return err
		}
	}
	r.lease = &leaseReader{cs: cs, namespace: s.election.LeaseNamespace, name: s.election.LeaseName, identity: s.election.Identity,
		admission: r.serverSide}
	master, err := masterStatus(s.metrics)
	if err != nil {
		return fmt.Errorf("%w: MetricsRegisterer: leader_election_master_status: %v", ErrInvalidOptions, err)
	}
	status := master.WithLabelValues(s.election.LeaseName)
	status.Set(0)
	r.events = &leaseEvents{
		recorder: sync.OnceValue(func() events.EventRecorder { return r.mgr.GetEventRecorder(eventRecorderName) }),
		cs:       cs, identity: s.election.Identity,
		namespace: s.election.LeaseNamespace, name: s.election.LeaseName, release: s.election.ReleaseOnCancel,
		stopping: func() bool { return r.baseContext().Err() != nil },
		stats:    func() k8sle.Stats { return r.elector.Elector().Stats() },
		reasons:  leaderReasons, what: "leader",
	}
	callbacks := leaderelection.Callbacks{
		OnStartedLeading: func(ctx context.Context) { status.Set(1); r.events.started(ctx) },
		OnStoppedLeading: func() { status.Set(0); r.events.stopped() },
	}
	if r.elector, err = leaderelection.New(s.election, cs, r.bus, callbacks, r.slogger); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	r.life, err = lifecycle.NewManager(r.bus, lifecycle.Options{
		Logger:      r.slogger,
		StopTimeout: s.stop,
		TermContext: r.elector.TermContext,
		// A term missing a leader-only controller (failed, or stuck from the last term)
		// is resigned after the runtime's grace, so that another replica leads.
		StepDown:    r.elector.Resign,
		OnTermReady: func(rep lifecycle.TermReport) { r.metrics.termReady.Observe(rep.Latency.Seconds()) },
	})
	if err != nil {
		return err
	}
	return r.life.AddAllReplica(r.elector)
}

// NeedLeaderElection returns false: the Runtime runs on every replica, and decides
// itself when the leader-only work runs.
func (r *Runtime) NeedLeaderElection() bool { return false }

// Start is called by the manager: it builds and warms the first instance of every
// leader-only controller, whose warm-up syncs the informers of its watches on the
// shared cache (so that a new leader starts warm), then
// campaigns, leads and campaigns again until ctx ends. It returns nil after ctx ended,
// or the error of a failed lease release; a second call returns ErrStarted. Without
// the single-leader election (LeaderElectionID empty) it only runs the bus until ctx
// ends. It stops with ErrControllerLeftOnManager when a controller it did not start
// runs on this replica (see Runtime.Manager).
func (r *Runtime) Start(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		return ErrStarted
	}
	var checked sync.WaitGroup
	defer checked.Wait()
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	checked.Go(func() {
		if err := checkLeftOnManager(ctx, r.mgr, r.before); err != nil {
			r.logger.Error(err, "stopping")
			stop(err)
		}
	})
	err := r.run(ctx)
	if cause := context.Cause(ctx); errors.Is(cause, ErrControllerLeftOnManager) {
		return cause
	}
	return err
}

// run is Start's work, until ctx ends.
func (r *Runtime) run(ctx context.Context) error {
	r.base.Store(&ctx)
	if r.elector == nil {
		r.warm.Store(true)
		r.logger.Info("no single-leader election (Options.LeaderElectionID is empty): sharded controllers only",
			"identity", r.identity)
		r.bus.Start()
		defer r.bus.Stop()
		<-ctx.Done()
		return nil
	}
	r.mu.Lock()
	controllers := r.controllers
	r.mu.Unlock()
	for _, c := range controllers {
		if err := c.warm(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	r.warm.Store(true)
	r.logger.Info("informers warm; campaigning", "identity", r.identity, "controllers", len(controllers))
	if r.leaderOnly.Load() == 0 {
		warn(r.logger, "no leader-only work is registered: this replica campaigns and leads for nothing. "+
			"Register leader-only controllers with controllerruntime.NewControllerManagedBy(rt.Manager()) (one built with "+
			"ctrl.NewControllerManagedBy on the manager runs on every replica, and its fenced writes fail with ErrNoTerm) "+
			"and functions with AddLeaderOnly; "+
			"with sharded controllers only, leave Options.LeaderElectionID empty",
			"identity", r.identity)
	}
	r.bus.Start()
	defer r.bus.Stop()
	if r.deaths != nil {
		// The pod watches end with the elector; wait for them too.
		defer r.deaths.Wait()
	}
	defer r.events.wg.Wait()
	return r.life.Run(ctx)
}

// baseContext is the context given to Start.
func (r *Runtime) baseContext() context.Context {
	if p := r.base.Load(); p != nil {
		return *p
	}
	return context.Background()
}

// Bus returns the Runtime's event bus, for StateReplayers
// (leadership.NewStateReplayer) and the subscriptions of leader-only work.
func (r *Runtime) Bus() *busevents.EventBus { return r.bus }

// Identity returns this replica's identity in the Lease.
func (r *Runtime) Identity() string { return r.identity }

// IsLeader reports whether this replica leads now, by its own clock; false without
// the single-leader election.
func (r *Runtime) IsLeader() bool { return r.elector != nil && r.elector.Elector().IsLeader() }

// Term returns the current term, 0 while not leading and without the single-leader
// election.
func (r *Runtime) Term() uint64 {
	if r.elector == nil {
		return 0
	}
	return r.elector.Elector().Term()
}

// GetLeader returns the holder of the Lease last observed, "" if none and without the
// single-leader election.
func (r *Runtime) GetLeader() string {
	if r.elector == nil {
		return ""
	}
	return r.elector.Elector().GetLeader()
}

// Status returns the term runtime's snapshot: terms, readiness, components; the zero
// Status without the single-leader election.
func (r *Runtime) Status() lifecycle.Status {
	if r.life == nil {
		return lifecycle.Status{}
	}
	return r.life.Status()
}

// needElection refuses the registration of leader-only work what when the Runtime
// runs no single-leader election.
func (r *Runtime) needElection(what string) error {
	if r.elector != nil {
		return nil
	}
	return fmt.Errorf("%w: %s is leader-only work, which needs Options.LeaderElectionID (and LeaderElectionNamespace): "+
		"set them in New's options, or register a sharded controller with AddShardedController", ErrInvalidRegistration, what)
}

// AddReplayer registers the replayer of state an all-replica runnable computes
// (typically a *leadership.StateReplayer[T] on Bus()); it is replayed at the start of
// each term, after the leader-only work subscribed. See docs/design/controllerruntime.md, # State for a new leader.
func (r *Runtime) AddReplayer(name string, rp lifecycle.Replayer) error {
	if err := r.needElection(fmt.Sprintf("replayer %q", name)); err != nil {
		return err
	}
	if err := r.claim(name); err != nil {
		return err
	}
	return wrapRegistration(r.life.AddReplayer(name, rp))
}

// AddLeaderOnly registers fn to run on the leader, once per term, under a context that
// ends with the term and carries it (termctx.FromContext). fn must return once ctx ends; if
// it receives replayed state it subscribes first and then calls Subscribed(ctx), and if
// not it calls Subscribed(ctx) at once (the term's replays wait for every leader-only
// function to do so, up to 2s).
func (r *Runtime) AddLeaderOnly(name string, fn func(ctx context.Context) error) error {
	if fn == nil {
		return fmt.Errorf("%w: leader-only function %q is nil", ErrInvalidRegistration, name)
	}
	if err := r.needElection(fmt.Sprintf("leader-only function %q", name)); err != nil {
		return err
	}
	if err := r.claim(name); err != nil {
		return err
	}
	if err := r.life.AddLeaderOnly(&funcComponent{name: name, fn: fn}); err != nil {
		return wrapRegistration(err)
	}
	r.leaderOnly.Add(1)
	return nil
}

// claim reserves name before Start.
func (r *Runtime) claim(name string) error {
	if r.started.Load() {
		return ErrStarted
	}
	if name == "" {
		return fmt.Errorf("%w: name is empty", ErrInvalidRegistration)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names[name] {
		return fmt.Errorf("%w: name %q is taken; give each registration its own", ErrInvalidRegistration, name)
	}
	r.names[name] = true
	census.runs(name)
	return nil
}

func wrapRegistration(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, lifecycle.ErrRunning):
		return fmt.Errorf("%w: %w", ErrStarted, err)
	default:
		return fmt.Errorf("%w: %w", ErrInvalidRegistration, err)
	}
}

// healthz fails while the elector missed its renew deadline or a component failed;
// it passes without the single-leader election.
func (r *Runtime) healthz(*http.Request) error {
	if r.elector == nil {
		return nil
	}
	if err := r.elector.Elector().Healthy(); err != nil {
		return err
	}
	return r.life.Status().Healthy()
}

// readyz fails until the leader-only controllers' informers are synced.
func (r *Runtime) readyz(*http.Request) error {
	if !r.warm.Load() {
		return errors.New("controllerruntime: informers of the leader-only controllers not synced yet")
	}
	return nil
}

// funcComponent runs a leader-only function each term.
type funcComponent struct {
	name string
	fn   func(ctx context.Context) error
}

func (c *funcComponent) Name() string { return c.name }

func (c *funcComponent) Start(ctx context.Context) error { return c.fn(ctx) }

// leaseOf returns the reader of t's Lease, for the fenced client: a shard's of a
// sharded controller, or the single leader's (a term stamped without its Lease, as an
// election disabled stamps it, is the single leader's); nil when this Runtime has none.
func (r *Runtime) leaseOf(t termctx.Term) *leaseReader {
	if t.Sharded() {
		l, _ := r.shardLeases.Load(t.Lease)
		reader, _ := l.(*leaseReader)
		return reader
	}
	return r.lease
}

// Subscribed tells the Runtime that the leader-only function running under ctx has made
// its subscriptions, so the term's replays may be published. Call it once, right after
// subscribing (at once if the function subscribes to nothing).
func Subscribed(ctx context.Context) { lifecycle.Subscribed(ctx) }

var _ manager.LeaderElectionRunnable = (*Runtime)(nil)
