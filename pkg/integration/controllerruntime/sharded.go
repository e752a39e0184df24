package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/baton-dev/baton/pkg/k8s/incarnation"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/termctx"
)

// ShardedController describes a controller whose objects are spread over the
// replicas: every replica runs it, and each reconciles only the objects of the
// shards it leads (see docs/design/controllerruntime.md, # Sharded controllers).
type ShardedController struct {
	// Name names the controller in logs and metrics. Required, unique in the Runtime.
	Name string
	// Reconciler is called for objects of the shards this replica leads, with a
	// context that carries the shard and its term (termctx.Get) and ends with that
	// term. Required.
	//
	// Requests name objects, shards hold UIDs: when an object is deleted and created
	// again under its name, the old one's shard owner may reconcile the name (finding
	// it gone, in its cache) while the new one's owner reconciles it (found), at once
	// and under different shard terms, each fence passing its writes. So a reconcile
	// that finds its object gone must not act on other objects by name alone (delete
	// a child named after it): use ownerReferences, which the garbage collector
	// follows by UID, or a finalizer, which keeps the name taken until the cleanup
	// is done under the old object's shard.
	Reconciler reconcile.Reconciler
	// For is the type of the objects, e.g. &corev1.ConfigMap{}: a request names one
	// object of this type, and the object's UID decides its shard. Required.
	For client.Object
	// Predicates filter the events of For's objects from the manager's cache (the
	// builder's WithEventFilter and For's WithPredicates); not applied to the shard
	// informers of CacheOwnShards and CacheOwnShardsByLabel.
	Predicates []predicate.Predicate
	// Sharding configures the ring. Namespace is required (where the ring's Leases
	// live); Name defaults to the controller's Name, Identity to the Runtime's. The
	// ring's Lease names must be DNS-1123 subdomains (sharding.Config's Name and
	// Identity): a controller Name with capitals needs a lowercase Sharding.Name.
	// Shards, the timings and SettleDelay default as sharding.Config's. Incarnation
	// and DeathWatch default to the Runtime's death signal (Options.DeathSignal).
	Sharding sharding.Config
	// Clientset reads and writes the ring's Leases. Default: one built from the
	// manager's rest config.
	Clientset kubernetes.Interface
	// Options are the controller's options, as Controller.Options.
	Options controller.Options
	// CacheOwnShards caches only the objects of the shards led here, where the API
	// server serves sharded list and watch: one informer per led shard, its list and
	// watch filtered by the shard's selector, started when the shard is acquired
	// (its first list enqueues the shard's objects) and stopped when its term ends.
	// The Reconciler must then read For's objects through Sharded.Reader, not the
	// manager's cache (which would cache them all). Where the server does not serve
	// it, the manager's cache holds every object, and Reader reads it. Its selectors
	// see an object's own UID only: for the Owns types, and on any cluster, use
	// CacheOwnShardsByLabel (with both, For's objects use the server's selector where
	// it is served, and the label elsewhere).
	CacheOwnShards bool
	// CacheOwnShardsByLabel caches only the objects of the shards led here on any
	// Kubernetes: each object is labelled once with its shard (ShardLabelKey, value
	// the shard) by the replica leading that shard, and one informer per led shard
	// and type selects that label, started when the shard is acquired (its first list
	// enqueues the shard's objects) and stopped when its term ends. The builder's Owns
	// types are cached so too, each child labelled with its controller owner's shard
	// (the owner's UID is in the ownerReference). A move writes no object: the label
	// names the shard, not its owner. The Reconciler must read For's and the Owns
	// types' objects through Sharded.Reader, never the manager's cache or client
	// (which would cache them all). Every replica also runs one metadata-only informer
	// per type selected by "label absent", and labels those of the shards it leads;
	// the RBAC it needs is list, watch and patch on those types. See
	// docs/design/controllerruntime.md, # Sharded controllers.
	CacheOwnShardsByLabel bool
	// ForSelector, with CacheOwnShards or CacheOwnShardsByLabel, restricts For's
	// objects cached per shard, and labelled, to those it selects, as a manager cache's
	// ByObject Label does (the manager's cache options do not reach the shard
	// informers). Nil: every object of For's type. It narrows For's objects only: the
	// Owns types' objects are labelled and cached by their controller owner's shard
	// whatever the owner's labels, so a child of an owner it leaves out is still
	// labelled once and cached by one replica.
	ForSelector labels.Selector
	// ShardWork is leader-only work per shard (sharding.Workers): each Work runs for
	// every shard this replica leads, from the shard's acquisition, under its term
	// context (the fenced client writes under it, fenced by the shard's term), and is
	// stopped and waited for before the shard is handed on, like its reconciles. A
	// leadership.ShardedReplayer hands a Work the shard's state at once (Watch).
	// Its policy is the single leader's (pkg/termrun): a failed run is restarted
	// after RestartDelay, a work failing for StepDownGrace in a row has the shard's
	// term resigned (StepDown defaults to Sharder.ResignShard), and a run not
	// returned OverstayAfter (default GracefulShutdownTimeout) after its term is
	// reported. Its Logger defaults to the controller's. None by default.
	ShardWork sharding.WorkConfig
}

// ShardedStats are counters of a sharded controller since it started.
type ShardedStats struct {
	// Reconciled counts the reconciles passed to the Reconciler.
	Reconciled uint64
	// Dropped counts the requests dropped because their shard was not led here when
	// they were processed (the shard's owner reconciles the object).
	Dropped uint64
	// Enqueued counts the requests enqueued from the manager's cache when a shard was
	// acquired. (With a per-shard cache of For's objects, CacheOwnShards served or
	// CacheOwnShardsByLabel, the shard informer's first list enqueues them instead,
	// counted nowhere.)
	Enqueued uint64
	// Acquired counts the shard terms this replica started.
	Acquired uint64
	// LabelWrites counts the shard label patches (CacheOwnShardsByLabel) that
	// succeeded. Each was sent for an object seen without its label, so it counts
	// object writes, but for a patch sent twice for one object (seen unlabelled
	// twice, e.g. at a shard's acquisition and by its event), the second writing
	// nothing.
	LabelWrites uint64
}

// AddShardedController registers c to run on every replica, each reconciling the
// objects of the shards it leads. It returns the handle of the controller, whose
// Sharder and Stats tell which shards this replica leads. Errors wrap
// ErrInvalidRegistration and name the field.
func (r *Runtime) AddShardedController(c ShardedController) (*Sharded, error) {
	switch {
	case c.Reconciler == nil:
		return nil, fmt.Errorf("%w: sharded controller %q has no Reconciler", ErrInvalidRegistration, c.Name)
	case c.For == nil:
		return nil, fmt.Errorf("%w: sharded controller %q: For is nil; set it to the type of the objects, e.g. &corev1.ConfigMap{}", ErrInvalidRegistration, c.Name)
	case c.Sharding.Namespace == "":
		return nil, fmt.Errorf("%w: sharded controller %q: Sharding.Namespace is empty; set it to the namespace of the ring's Leases", ErrInvalidRegistration, c.Name)
	case c.ForSelector != nil && !c.CacheOwnShards && !c.CacheOwnShardsByLabel:
		return nil, fmt.Errorf("%w: sharded controller %q: ForSelector without CacheOwnShards or CacheOwnShardsByLabel; restrict the manager's cache with its ByObject options instead", ErrInvalidRegistration, c.Name)
	}
	scheme := r.mgr.GetScheme()
	listObj, err := listOf(scheme, c)
	if err != nil {
		return nil, err
	}
	cfg := c.Sharding
	if cfg.Name == "" {
		cfg.Name = c.Name
	}
	if cfg.Identity == "" {
		cfg.Identity = r.identity
	}
	cs := c.Clientset
	if cs == nil {
		if cs, err = kubernetes.NewForConfig(r.mgr.GetConfig()); err != nil {
			return nil, fmt.Errorf("%w: sharded controller %q: Clientset: building one from the manager's rest config: %v", ErrInvalidRegistration, c.Name, err)
		}
	}
	s := &Sharded{
		r: r, spec: c, config: cfg, list: listObj, clientset: cs,
		logger: r.logger.WithValues("controller", c.Name, "ring", cfg.Name),
		shards: map[int]*shardLead{}, gone: map[types.NamespacedName]int{},
		stores:     map[reflect.Type]map[int]toolscache.Store{reflect.TypeOf(c.For): {}},
		queueReady: make(chan struct{}),
	}
	if s.forKind, err = s.newCacheKind(c.For, nil); err != nil {
		return nil, fmt.Errorf("%w: sharded controller %q: For: %w", ErrInvalidRegistration, c.Name, err)
	}
	if s.workers, err = s.newShardWorkers(); err != nil {
		return nil, err
	}
	if r.deaths != nil && cfg.DeathWatch == nil {
		// The death signal of Options.DeathSignal, with a pod watcher of its own that
		// Start waits for.
		if s.deaths, err = incarnation.NewWatcher(cs, toSlog(s.logger)); err != nil {
			return nil, fmt.Errorf("%w: sharded controller %q: %w", ErrInvalidRegistration, c.Name, err)
		}
		cfg.Incarnation, cfg.DeathWatch = r.incarnation, s.deaths
	}
	// The sharder adds the ring's name to its lines itself.
	s.events = newShardEvents(s)
	s.sharder, err = sharding.New(cfg, cs, sharding.Callbacks{OnAcquired: s.acquired, OnLost: s.events.lost},
		toSlog(r.logger.WithValues("controller", c.Name)))
	if err != nil {
		return nil, fmt.Errorf("%w: sharded controller %q: %w", ErrInvalidRegistration, c.Name, err)
	}
	s.ring = s.sharder.Ring()
	if c.CacheOwnShardsByLabel {
		if err := checkShardLabel(cfg.Name, s.ring); err != nil {
			return nil, fmt.Errorf("%w: sharded controller %q: %w", ErrInvalidRegistration, c.Name, err)
		}
		s.labelKey = ShardLabelKey(cfg.Name, s.ring)
	}
	if r.serverSide {
		if err := labelValue("Sharding.Name "+cfg.Name+"'s last shard Lease", sharding.ShardLeaseName(cfg.Name, s.ring.Shards()-1)); err != nil {
			return nil, fmt.Errorf("%w: sharded controller %q: %w", ErrInvalidRegistration, c.Name, err)
		}
	}
	if err := s.buildController(scheme); err != nil {
		return nil, err
	}
	if err := r.addSharded(s); err != nil {
		return nil, err
	}
	if err := r.mgr.AddReadyzCheck(RingReadyzCheckPrefix+c.Name, s.readyz); err != nil {
		return nil, fmt.Errorf("controllerruntime: adding the readyz check of sharded controller %q: %w", c.Name, err)
	}
	return s, nil
}

// buildController builds the sharded controller's unmanaged controller-runtime
// controller, on the shard queue, and the watch its objects come from: the manager's
// cache, or (CacheOwnShards, CacheOwnShardsByLabel) a watching client for the shard
// informers.
func (s *Sharded) buildController(scheme *runtime.Scheme) error {
	var err error
	opts := s.spec.Options
	opts.Reconciler = reconcile.Func(s.reconcile)
	opts.SkipNameValidation = ptr.To(true)
	opts.NeedLeaderElection, opts.EnableWarmup = ptr.To(false), ptr.To(true)
	if opts.Logger.GetSink() == nil {
		opts.Logger = s.r.logger
	}
	if s.ctrl, err = controller.NewUnmanaged(s.spec.Name, opts); err != nil {
		return fmt.Errorf("%w: building sharded controller %q: %w", ErrInvalidRegistration, s.spec.Name, err)
	}
	if s.spec.CacheOwnShards || s.spec.CacheOwnShardsByLabel {
		s.watcher, err = client.NewWithWatch(s.r.mgr.GetConfig(), client.Options{Scheme: scheme, Mapper: s.r.mgr.GetRESTMapper()})
		if err != nil {
			return fmt.Errorf("%w: sharded controller %q: a watching client from the manager's rest config: %v", ErrInvalidRegistration, s.spec.Name, err)
		}
	} else if err := s.watchCache(); err != nil {
		return err
	}
	if err := s.ctrl.Watch(source.Func(s.takeQueue)); err != nil {
		return fmt.Errorf("%w: sharded controller %q: %w", ErrInvalidRegistration, s.spec.Name, err)
	}
	return nil
}

// RingReadyzCheckPrefix starts the name of each sharded controller's readyz check,
// "baton-ring-<controller>": it fails while the replica refuses to campaign for the
// ring's shards because replicas of another shape (Shards) are active (see
// docs/design/sharding.md, # Ring shape).
const RingReadyzCheckPrefix = "baton-ring-"

// readyz fails while the ring's sharder refuses to campaign.
func (s *Sharded) readyz(*http.Request) error {
	if s.sharder.Refusing() {
		return fmt.Errorf("controllerruntime: sharded controller %q refuses to campaign: replicas of ring %q with another Shards are active (%v)",
			s.spec.Name, s.config.Name, s.sharder.Mismatched())
	}
	return nil
}

// addSharded takes s's name, adds s to the manager and counts it in the metrics.
func (r *Runtime) addSharded(s *Sharded) error {
	if err := r.claim(s.spec.Name); err != nil {
		return err
	}
	if err := r.mgr.Add(s); err != nil {
		return fmt.Errorf("controllerruntime: adding sharded controller %q to the manager: %w", s.spec.Name, err)
	}
	r.mu.Lock()
	r.sharded = append(r.sharded, s)
	r.mu.Unlock()
	return nil
}

// listOf returns an empty list of c.For's type.
func listOf(scheme *runtime.Scheme, c ShardedController) (client.ObjectList, error) {
	gvk, err := apiutil.GVKForObject(c.For, scheme)
	if err != nil {
		return nil, fmt.Errorf("%w: sharded controller %q: For: %v", ErrInvalidRegistration, c.Name, err)
	}
	obj, err := scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err != nil {
		return nil, fmt.Errorf("%w: sharded controller %q: For: no list type of %s: %v", ErrInvalidRegistration, c.Name, gvk, err)
	}
	list, ok := obj.(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("%w: sharded controller %q: For: %T is not a client.ObjectList", ErrInvalidRegistration, c.Name, obj)
	}
	return list, nil
}

// watchCache makes the manager's cache of For the controller's source, indexed by
// shard (shardIndex).
func (s *Sharded) watchCache() error {
	obj := s.spec.For.DeepCopyObject().(client.Object)
	shardOf := func(o client.Object) []string { return []string{strconv.Itoa(s.ring.ShardOf(string(o.GetUID())))} }
	if err := s.r.mgr.GetFieldIndexer().IndexField(context.Background(), obj, s.shardIndex(), shardOf); err != nil {
		return fmt.Errorf("%w: sharded controller %q: indexing %T by shard: %w", ErrInvalidRegistration, s.spec.Name, s.spec.For, err)
	}
	if err := s.ctrl.Watch(source.Kind(s.r.mgr.GetCache(), obj, s.handler(), s.spec.Predicates...)); err != nil {
		return fmt.Errorf("%w: sharded controller %q: watching %T: %w", ErrInvalidRegistration, s.spec.Name, s.spec.For, err)
	}
	return nil
}

// Sharded is a sharded controller added with AddShardedController: a runnable of the
// manager that every replica runs. Its methods are safe for concurrent use.
type Sharded struct {
	r         *Runtime
	spec      ShardedController
	config    sharding.Config // spec.Sharding with Name and Identity filled in
	events    *shardEvents    // the Events of its shard Leases
	list      runtime.Object  // an empty list of For's type
	clientset kubernetes.Interface
	logger    logr.Logger
	sharder   *sharding.Sharder
	ring      sharding.Ring
	ctrl      controller.Controller
	watcher   client.WithWatch     // the shard informers' client, with CacheOwnShards or CacheOwnShardsByLabel
	workers   *sharding.Workers    // ShardWork's, nil without
	deaths    *incarnation.Watcher // the shard electors' death signal; nil when off

	// queueReady is closed once queue is set, when the controller's sources start.
	queueReady chan struct{}
	queue      workqueue.TypedRateLimitingInterface[reconcile.Request]

	forKind    *cacheKind   // For's type
	childKinds []*cacheKind // the Owns types cached by label; set before Start
	labelKey   string       // ShardLabelKey, with CacheOwnShardsByLabel

	reconciled, dropped, enqueued, acquiredN, labelWrites atomic.Uint64
	serverSharding                                        atomic.Int32 // a ServerSharding
	ownShards                                             atomic.Bool  // For's cache by the server's shard selector; see ownCache
	labelFor                                              atomic.Bool  // For's cache by the shard label; see ownCache

	// mu guards shards, gone and stores.
	mu     sync.Mutex
	shards map[int]*shardLead                        // the shards led now
	gone   map[types.NamespacedName]int              // the shard of objects enqueued but not in the cache (deleted, or owners not yet cached), until reconciled
	stores map[reflect.Type]map[int]toolscache.Store // the shard informers' stores per type and shard, with ownCache and the Owns types by label
}

// shardLead is one term of one shard led here.
type shardLead struct {
	ctx      context.Context // the shard's term context, with its term reference
	inflight sync.WaitGroup  // reconciles running under this term
}

// Sharder returns the ring's sharder of this replica (Owned, Members, Stats).
func (s *Sharded) Sharder() *sharding.Sharder { return s.sharder }

// Stats returns the controller's counters.
func (s *Sharded) Stats() ShardedStats {
	return ShardedStats{
		Reconciled: s.reconciled.Load(), Dropped: s.dropped.Load(),
		Enqueued: s.enqueued.Load(), Acquired: s.acquiredN.Load(), LabelWrites: s.labelWrites.Load(),
	}
}

// NeedLeaderElection returns false: every replica runs a sharded controller.
func (s *Sharded) NeedLeaderElection() bool { return false }

// Start runs the controller until ctx ends: it syncs the informer of For and starts
// the workers, then joins the ring and reconciles the objects of the shards it leads.
// When ctx ends it leaves the ring, handing its shards over (each after its running
// reconciles returned), and only then stops the workers.
func (s *Sharded) Start(ctx context.Context) error {
	if err := s.chooseCache(ctx); err != nil {
		return err
	}
	// The controller outlives ctx until the shards are handed over.
	ctrlCtx, stopCtrl := context.WithCancel(context.WithoutCancel(ctx))
	waitLabellers := s.runLabellers(ctrlCtx)
	defer func() { stopCtrl(); waitLabellers() }()
	if wu, ok := s.ctrl.(warmupper); ok {
		if err := wu.Warmup(ctrlCtx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("controllerruntime: warming sharded controller %q: %w", s.spec.Name, err)
		}
	}
	ctrlDone := make(chan error, 1)
	go func() { ctrlDone <- s.ctrl.Start(ctrlCtx) }()
	runErr := s.sharder.Run(ctx)
	defer s.events.wait()
	if s.deaths != nil {
		s.deaths.Wait() // the pod watches end with the shard electors
	}
	stopCtrl()
	ctrlErr := <-ctrlDone
	return errors.Join(runErr, ctrlErr)
}

// chooseCache decides, once at Start, where For's objects are cached: the shard
// informers of the server's selector (CacheOwnShards, served), of the shard label
// (CacheOwnShardsByLabel), or the manager's cache.
func (s *Sharded) chooseCache(ctx context.Context) error {
	s.reportServerSharding(ctx)
	switch {
	case s.spec.CacheOwnShards && s.ServerSharding() == ShardingServed:
		s.ownShards.Store(true)
	case s.spec.CacheOwnShardsByLabel:
		s.labelFor.Store(true)
		s.logger.Info("caching only the objects of the shards led here, by their shard label", "label", s.labelKey)
	case s.spec.CacheOwnShards:
		return s.watchCache()
	}
	return nil
}

// takeQueue is a source that only keeps the controller's queue, for the requests
// enqueued when a shard is acquired.
func (s *Sharded) takeQueue(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	s.queue = q
	close(s.queueReady)
	return nil
}

// handler enqueues the events of objects whose shard is led here, and remembers the
// shard of deleted objects (a request names the object, and a deleted object's UID
// is no longer in the cache).
func (s *Sharded) handler() handler.EventHandler {
	enqueue := func(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if s.leads(s.ring.ShardOf(string(obj.GetUID()))) {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			shard := s.ring.ShardOf(string(e.Object.GetUID()))
			key := client.ObjectKeyFromObject(e.Object)
			s.mu.Lock()
			_, led := s.shards[shard]
			if led {
				s.gone[key] = shard // only for shards led here: the entry goes at the reconcile
			}
			s.mu.Unlock()
			if led {
				q.Add(reconcile.Request{NamespacedName: key})
			}
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
	}
}

func (s *Sharded) leads(shard int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.shards[shard]
	return ok
}

// acquired is the sharder's OnAcquired: it records the shard's term, enqueues every
// object of the shard in the cache (the new owner starts from the current state, not
// from the next event; with the own-shards cache, the shard informer's first list
// does), starts the shard's ShardWork, and when the term ends waits for the
// reconciles running under it, the shard's informer and its ShardWork, so the shard
// is handed over only after they returned.
func (s *Sharded) acquired(ctx context.Context) {
	t, _ := termctx.Get(ctx)
	st, _ := sharding.ShardTermOf(t, true)
	s.events.of(st.Shard).started(ctx)
	s.r.shardLeases.LoadOrStore(t.Lease, &leaseReader{cs: s.clientset, namespace: t.Lease.Namespace,
		name: t.Lease.Name, identity: s.config.Identity, admission: s.r.serverSide, shard: true})
	lead := &shardLead{ctx: ctx}
	s.mu.Lock()
	s.shards[st.Shard] = lead
	s.mu.Unlock()
	s.acquiredN.Add(1)
	waitWork := s.runShardWork(lead.ctx)
	defer waitWork()
	var informer sync.WaitGroup
	select {
	case <-s.queueReady:
		s.startShardCaches(ctx, st.Shard, &informer)
	case <-ctx.Done():
	}
	<-ctx.Done()
	defer informer.Wait()
	s.mu.Lock()
	if s.shards[st.Shard] == lead {
		delete(s.shards, st.Shard)
	}
	s.mu.Unlock()
	lead.inflight.Wait()
}

// startShardCaches starts the shard's informers on wg (For's, by the server's selector
// or the label, and the Owns types' by label) and labels the objects of the shard not
// labelled yet; without a per-shard cache of For it enqueues the shard's objects in
// the manager's cache.
func (s *Sharded) startShardCaches(ctx context.Context, shard int, wg *sync.WaitGroup) {
	switch {
	case s.ownShards.Load():
		wg.Go(func() { s.runShardCache(ctx, shard) })
	case !s.labelFor.Load():
		s.enqueueShard(ctx, shard)
	}
	if s.labelKey == "" {
		return
	}
	for _, k := range s.labelledKinds() {
		wg.Go(func() { s.runShardLabelCache(ctx, shard, k) })
	}
	wg.Go(func() { s.labelBacklog(ctx, shard) })
}

// shardIndex names the index of the manager's cache of For by shard (watchCache), one
// per sharded controller: a shard's objects are listed by it, not found among all.
func (s *Sharded) shardIndex() string { return "baton.dev/shard." + s.spec.Name }

// enqueueShard enqueues every object of shard in the cache: those the shard index
// lists, read in place (only their keys are taken).
func (s *Sharded) enqueueShard(ctx context.Context, shard int) {
	list := s.list.DeepCopyObject().(client.ObjectList)
	err := s.r.mgr.GetCache().List(ctx, list, client.MatchingFields{s.shardIndex(): strconv.Itoa(shard)}, client.UnsafeDisableDeepCopy)
	if err != nil {
		if ctx.Err() == nil {
			s.logger.Error(err, "listing the objects of an acquired shard; they are reconciled on their next event", "shard", shard)
		}
		return
	}
	n := 0
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(client.Object); ok {
			s.queue.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
			n++
		}
		return nil
	})
	s.enqueued.Add(uint64(n))
}

// reconcile runs the Reconciler for req if its object's shard is led here, under a
// context that carries the shard's term and ends with it; it drops req otherwise.
func (s *Sharded) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	shard, ok, err := s.shardOf(ctx, req.NamespacedName)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !ok {
		return reconcile.Result{}, nil // deleted before its delete event: nobody's
	}
	lead := s.begin(shard)
	if lead == nil {
		s.dropped.Add(1)
		return reconcile.Result{}, nil // the shard's owner reconciles it
	}
	defer lead.inflight.Done()
	rctx, cancel := context.WithCancel(lead.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	rctx = log.IntoContext(rctx, log.FromContext(ctx).WithValues("shard", shard))
	s.reconciled.Add(1)
	return s.spec.Reconciler.Reconcile(rctx, req)
}

// begin returns the live term of shard with one more reconcile counted in it, or nil
// when the shard is not led here or its term ended.
func (s *Sharded) begin(shard int) *shardLead {
	s.mu.Lock()
	defer s.mu.Unlock()
	lead := s.shards[shard]
	if lead == nil || lead.ctx.Err() != nil {
		return nil
	}
	lead.inflight.Add(1)
	return lead
}

// shardOf returns the shard of the object key names: by its UID in the cache, or the
// shard recorded at its delete event, or by an Owns event of a child (whose
// ownerReference has the UID) before the cache had the owner. ok is false when
// neither knows it.
func (s *Sharded) shardOf(ctx context.Context, key types.NamespacedName) (shard int, ok bool, err error) {
	obj := s.spec.For.DeepCopyObject().(client.Object)
	err = s.Reader().Get(ctx, key, obj)
	switch {
	case err == nil:
		// An object of this name deleted and created again: the request is the new
		// one's, and the old one's recorded shard is no longer needed (it would stay
		// for good when the new one is in another replica's shard).
		s.mu.Lock()
		delete(s.gone, key)
		s.mu.Unlock()
		return s.ring.ShardOf(string(obj.GetUID())), true, nil
	case apierrors.IsNotFound(err):
		s.mu.Lock()
		defer s.mu.Unlock()
		shard, ok = s.gone[key]
		delete(s.gone, key)
		return shard, ok, nil
	default:
		return 0, false, err
	}
}

var _ manager.LeaderElectionRunnable = (*Sharded)(nil)
