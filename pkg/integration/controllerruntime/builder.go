package controllerruntime

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// Builder builds a controller of a Runtime with the chain of controller-runtime's
// builder (builder.ControllerManagedBy): For, Owns, Watches, WithEventFilter,
// WithOptions, Named, then Complete. A kubebuilder controller's SetupWithManager
// changes one line, the builder's package:
//
//	func (r *GuestbookReconciler) SetupWithManager(mgr ctrl.Manager) error {
//		return batonctrl.NewControllerManagedBy(mgr). // was ctrl.NewControllerManagedBy(mgr)
//			For(&webappv1.Guestbook{}).
//			Owns(&appsv1.Deployment{}).
//			Named("guestbook").
//			Complete(r)
//	}
//
// where mgr is Runtime.Manager(), the manager New was given, wrapped (main.go sets
// mgr = rt.Manager() once, after New). The controller is leader-only
// (Runtime.AddController: built anew each term, warm on every replica); with Sharded
// it is a sharded controller (Runtime.AddShardedController): every replica runs it
// and reconciles the objects of the shards it leads.
//
// Each call, and the options WithPredicates, OnlyMetadata (leader-only controllers)
// and MatchEveryOwner, mean what controller-runtime's of the same names mean; what a
// sharded controller adds is on each method. Errors of any call are returned by Complete (and Build), wrapping
// ErrInvalidRegistration; the controller is not registered then.
type Builder struct {
	mgr      manager.Manager
	name     string
	forInput *watchInput
	owns     []watchInput
	watches  []watchInput
	filters  []predicate.Predicate
	options  controller.Options
	sharding *sharding.Config
	byLabel  bool            // the CacheByLabel option of Sharded
	byServer bool            // the CacheByServerShards option of Sharded
	forSel   labels.Selector // the ForSelector option of Sharded
	errs     []error
}

// watchInput is one For, Owns or Watches call.
type watchInput struct {
	object     client.Object
	handler    handler.EventHandler // Watches only
	predicates []predicate.Predicate
	metadata   bool // OnlyMetadata
	everyOwner bool // MatchEveryOwner, Owns only
}

// NewControllerManagedBy returns a Builder of a controller on mgr, which must be
// Runtime.Manager() (Complete says so otherwise). It is named as controller-runtime's
// ctrl.NewControllerManagedBy, so that a migration changes the package only.
func NewControllerManagedBy(mgr manager.Manager) *Builder { return ControllerManagedBy(mgr) }

// ControllerManagedBy is NewControllerManagedBy, named as controller-runtime's
// builder.ControllerManagedBy.
func ControllerManagedBy(mgr manager.Manager) *Builder { return &Builder{mgr: mgr} }

// For sets the type reconciled: its events enqueue the object. Required, once (the
// builder has no WatchesRawSource: a Runtime's sources are on the manager's cache).
func (b *Builder) For(obj client.Object, opts ...ForOption) *Builder {
	if b.forInput != nil {
		b.errs = append(b.errs, errors.New("For is called twice; a controller reconciles one type"))
		return b
	}
	in := watchInput{object: obj}
	for _, o := range opts {
		o.applyToFor(&in)
	}
	b.forInput = &in
	return b
}

// Owns adds a watch of obj whose events enqueue its controller owner of For's type
// (each owner of that type with MatchEveryOwner). Sharded: the owner is enqueued only
// on the replica leading the owner's shard, known from the UID in the ownerReference;
// with CacheByLabel, obj's objects are cached only there (read them through the
// Sharded's Reader).
func (b *Builder) Owns(obj client.Object, opts ...OwnsOption) *Builder {
	in := watchInput{object: obj}
	for _, o := range opts {
		o.applyToOwns(&in)
	}
	b.owns = append(b.owns, in)
	return b
}

// Watches adds a watch of obj whose events enqueue what h returns (e.g.
// handler.EnqueueRequestsFromMapFunc). Sharded: the requests name For objects, each
// reconciled only by the replica leading that object's shard.
func (b *Builder) Watches(obj client.Object, h handler.EventHandler, opts ...WatchesOption) *Builder {
	in := watchInput{object: obj, handler: h}
	for _, o := range opts {
		o.applyToWatches(&in)
	}
	b.watches = append(b.watches, in)
	return b
}

// WithEventFilter adds p to the predicates of every watch, before the options' own.
func (b *Builder) WithEventFilter(p predicate.Predicate) *Builder {
	b.filters = append(b.filters, p)
	return b
}

// WithOptions sets the controller's options; see Controller.Options for the fields
// the Runtime sets itself.
func (b *Builder) WithOptions(o controller.Options) *Builder {
	b.options = o
	return b
}

// Named sets the controller's name, unique in the Runtime; default For's kind in
// lower case.
func (b *Builder) Named(name string) *Builder {
	b.name = name
	return b
}

// Sharded makes the controller a sharded one (ShardedController.Sharding is cfg):
// every replica runs it and reconciles the objects of the shards it leads.
// cfg.Namespace is required; cfg.Name defaults to the controller's name. The option
// CacheByLabel caches For's and the Owns types' objects of the led shards only
// (ShardedController.CacheOwnShardsByLabel), CacheByServerShards For's by the API
// server's shard selector (CacheOwnShards). For ShardWork or a Clientset of its own,
// use Runtime.AddShardedController.
func (b *Builder) Sharded(cfg sharding.Config, opts ...ShardedOption) *Builder {
	b.sharding = &cfg
	for _, o := range opts {
		o.applyToSharded(b)
	}
	return b
}

// ShardedOption configures Sharded: CacheByLabel, CacheByServerShards, ForSelector.
type ShardedOption interface{ applyToSharded(*Builder) }

type cacheByLabel struct{}

// CacheByLabel makes a sharded controller cache only the objects of the shards its
// replica leads, on any Kubernetes, by a shard label written once per object
// (ShardedController.CacheOwnShardsByLabel): For's objects and the Owns types', each
// child with its controller owner's shard. The Reconciler reads them through the
// handle's Reader (Build returns the handle). Owns with MatchEveryOwner or
// OnlyMetadata, or of a type already cached (For's, or an earlier Owns call's), is
// refused with it; Watches stay on the manager's cache.
var CacheByLabel cacheByLabel

func (cacheByLabel) applyToSharded(b *Builder) { b.byLabel = true }

type cacheByServerShards struct{}

// CacheByServerShards makes a sharded controller cache For's objects of the shards
// its replica leads by the API server's shard selector, where the server serves
// sharded list and watch (ShardedController.CacheOwnShards). With CacheByLabel too,
// For's objects are cached so where it is served, by label elsewhere, and the Owns
// types by label always.
var CacheByServerShards cacheByServerShards

func (cacheByServerShards) applyToSharded(b *Builder) { b.byServer = true }

type forSelector struct{ sel labels.Selector }

// ForSelector restricts For's objects that CacheByLabel caches and labels to those
// sel selects (ShardedController.ForSelector), as a manager cache's ByObject Label
// does for the manager's cache, which the shard informers do not use. The Owns types'
// objects are not narrowed by it.
func ForSelector(sel labels.Selector) ShardedOption { return forSelector{sel} }

func (o forSelector) applyToSharded(b *Builder) { b.forSel = o.sel }

// Complete registers the controller with r as its Reconciler.
func (b *Builder) Complete(r reconcile.Reconciler) error {
	_, err := b.Build(r)
	return err
}

// Build registers the controller as Complete does and returns, for a sharded
// controller, its handle (nil for a leader-only controller).
func (b *Builder) Build(r reconcile.Reconciler) (*Sharded, error) {
	rt, gvk, err := b.check(r)
	if err != nil {
		return nil, err
	}
	name := b.name
	if name == "" {
		name = strings.ToLower(gvk.Kind)
	}
	opts := b.controllerOptions(name, gvk)
	if b.sharding != nil {
		return b.buildSharded(rt, name, r, opts)
	}
	watches, err := b.leaderOnlyWatches(rt)
	if err != nil {
		return nil, err
	}
	return nil, rt.AddController(Controller{Name: name, Reconciler: r, Watches: watches, Options: opts})
}

// check returns the Runtime of the builder's manager and For's kind, or the errors
// of the chain.
func (b *Builder) check(r reconcile.Reconciler) (*Runtime, schema.GroupVersionKind, error) {
	errs := b.errs
	rm, ok := b.mgr.(*runtimeManager)
	if !ok {
		errs = append(errs, fmt.Errorf("the manager %T is not a Runtime's: pass rt.Manager() (New's manager, wrapped) to the builder", b.mgr))
	}
	if r == nil {
		errs = append(errs, errors.New("the Reconciler is nil"))
	}
	var gvk schema.GroupVersionKind
	if b.forInput == nil || b.forInput.object == nil {
		errs = append(errs, errors.New("For is not called (or with nil); call For with the type the controller reconciles"))
	} else if rm != nil {
		var err error
		if gvk, err = apiutil.GVKForObject(b.forInput.object, rm.GetScheme()); err != nil {
			errs = append(errs, fmt.Errorf("For: %w", err))
		}
	}
	for i, w := range b.watches {
		if w.object == nil || w.handler == nil {
			errs = append(errs, fmt.Errorf("Watches call %d: the object and the handler are required", i+1))
		}
	}
	for i, w := range b.owns {
		if w.object == nil {
			errs = append(errs, fmt.Errorf("Owns call %d: the object is nil", i+1))
		}
	}
	if len(errs) > 0 {
		return nil, gvk, fmt.Errorf("%w: builder of controller %q: %w", ErrInvalidRegistration, b.name, errors.Join(errs...))
	}
	return rm.rt, gvk, nil
}

// controllerOptions are WithOptions' with controller-runtime's builder defaults: the
// manager's concurrency for For's kind and cache sync timeout, and its logger with
// the controller's name and kind, and the request's object.
func (b *Builder) controllerOptions(name string, gvk schema.GroupVersionKind) controller.Options {
	opts := b.options
	global := b.mgr.GetControllerOptions()
	if n, ok := global.GroupKindConcurrency[gvk.GroupKind().String()]; ok && n > 0 && opts.MaxConcurrentReconciles == 0 {
		opts.MaxConcurrentReconciles = n
	}
	if opts.CacheSyncTimeout == 0 && global.CacheSyncTimeout > 0 {
		opts.CacheSyncTimeout = global.CacheSyncTimeout
	}
	if opts.LogConstructor == nil && opts.Logger.GetSink() == nil {
		log := b.mgr.GetLogger().WithValues("controller", name, "controllerGroup", gvk.Group, "controllerKind", gvk.Kind)
		opts.LogConstructor = func(req *reconcile.Request) logr.Logger {
			if req == nil {
				return log
			}
			return log.WithValues(gvk.Kind, klog.KRef(req.Namespace, req.Name), "namespace", req.Namespace, "name", req.Name)
		}
	}
	return opts
}

// predicates are the event filters followed by in's own.
func (b *Builder) predicates(in watchInput) []predicate.Predicate {
	return append(append([]predicate.Predicate(nil), b.filters...), in.predicates...)
}

// object returns in's object, as metadata only with OnlyMetadata.
func (b *Builder) object(in watchInput) (client.Object, error) {
	if !in.metadata {
		return in.object, nil
	}
	gvk, err := apiutil.GVKForObject(in.object, b.mgr.GetScheme())
	if err != nil {
		return nil, fmt.Errorf("%w: OnlyMetadata: %w", ErrInvalidRegistration, err)
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m, nil
}

// leaderOnlyWatches are the Watches of a leader-only controller: For's objects,
// their owners, and the handlers'.
func (b *Builder) leaderOnlyWatches(rt *Runtime) ([]Watch, error) {
	var watches []Watch
	add := func(in watchInput, h handler.EventHandler) error {
		obj, err := b.object(in)
		if err != nil {
			return err
		}
		watches = append(watches, Watch{Object: obj, Handler: h, Predicates: b.predicates(in)})
		return nil
	}
	if err := add(*b.forInput, &handler.EnqueueRequestForObject{}); err != nil {
		return nil, err
	}
	for _, in := range b.owns {
		var opts []handler.OwnerOption
		if !in.everyOwner {
			opts = append(opts, handler.OnlyControllerOwner())
		}
		if err := add(in, handler.EnqueueRequestForOwner(rt.mgr.GetScheme(), rt.mgr.GetRESTMapper(), b.forInput.object, opts...)); err != nil {
			return nil, err
		}
	}
	for _, in := range b.watches {
		if err := add(in, in.handler); err != nil {
			return nil, err
		}
	}
	return watches, nil
}

// buildSharded registers a sharded controller, then adds the watches of Owns and
// Watches to it (they start with it, at the manager's Start).
func (b *Builder) buildSharded(rt *Runtime, name string, r reconcile.Reconciler, opts controller.Options) (*Sharded, error) {
	if b.forInput.metadata {
		return nil, fmt.Errorf("%w: sharded controller %q: For with OnlyMetadata: a sharded controller needs For's typed list", ErrInvalidRegistration, name)
	}
	if err := b.checkByLabel(name); err != nil {
		return nil, err
	}
	s, err := rt.AddShardedController(ShardedController{
		Name: name, Reconciler: r, For: b.forInput.object, Sharding: *b.sharding, Options: opts,
		Predicates: b.predicates(*b.forInput), CacheOwnShardsByLabel: b.byLabel, ForSelector: b.forSel,
		CacheOwnShards: b.byServer,
	})
	if err != nil {
		return nil, err
	}
	forGK := schema.GroupKind{}
	if gvk, err := apiutil.GVKForObject(b.forInput.object, rt.mgr.GetScheme()); err == nil {
		forGK = gvk.GroupKind()
	}
	for _, in := range b.owns {
		h := &shardOwnerHandler{s: s, owner: forGK, every: in.everyOwner}
		if b.byLabel {
			err = s.addOwnsByLabel(in.object, h)
		} else {
			err = b.watchSharded(s, in, h)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, in := range b.watches {
		if err := b.watchSharded(s, in, in.handler); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// checkByLabel refuses the Owns options that CacheByLabel cannot serve: a child is
// labelled with its controller owner's shard alone, and read typed.
func (b *Builder) checkByLabel(name string) error {
	if !b.byLabel {
		return nil
	}
	typeOf := map[reflect.Type]string{reflect.TypeOf(b.forInput.object): "For's"}
	for i, in := range b.owns {
		first, again := typeOf[reflect.TypeOf(in.object)]
		switch {
		case again:
			return fmt.Errorf("%w: sharded controller %q: Owns call %d: %T is %s type too, with CacheByLabel: it keeps one cache per type and shard", ErrInvalidRegistration, name, i+1, in.object, first)
		case in.everyOwner:
			return fmt.Errorf("%w: sharded controller %q: Owns call %d: MatchEveryOwner with CacheByLabel: a child is cached in its controller owner's shard only", ErrInvalidRegistration, name, i+1)
		case in.metadata:
			return fmt.Errorf("%w: sharded controller %q: Owns call %d: OnlyMetadata with CacheByLabel: the shard informers cache typed objects", ErrInvalidRegistration, name, i+1)
		}
		typeOf[reflect.TypeOf(in.object)] = fmt.Sprintf("Owns call %d's", i+1)
	}
	return nil
}

// watchSharded adds a watch of in's object on the manager's cache to s's controller.
func (b *Builder) watchSharded(s *Sharded, in watchInput, h handler.EventHandler) error {
	obj, err := b.object(in)
	if err != nil {
		return err
	}
	if err := s.ctrl.Watch(source.Kind(s.r.mgr.GetCache(), obj, h, b.predicates(in)...)); err != nil {
		return fmt.Errorf("%w: sharded controller %q: watching %T: %w", ErrInvalidRegistration, s.spec.Name, in.object, err)
	}
	return nil
}

// ForOption configures For: WithPredicates, OnlyMetadata.
type ForOption interface{ applyToFor(*watchInput) }

// OwnsOption configures Owns: WithPredicates, OnlyMetadata, MatchEveryOwner.
type OwnsOption interface{ applyToOwns(*watchInput) }

// WatchesOption configures Watches: WithPredicates, OnlyMetadata.
type WatchesOption interface{ applyToWatches(*watchInput) }

// Predicates filter the events of one For, Owns or Watches; see WithPredicates.
type Predicates []predicate.Predicate

// WithPredicates filters the events of one For, Owns or Watches (after the
// builder's WithEventFilter).
func WithPredicates(ps ...predicate.Predicate) Predicates { return Predicates(ps) }

func (p Predicates) applyToFor(in *watchInput)     { in.predicates = append(in.predicates, p...) }
func (p Predicates) applyToOwns(in *watchInput)    { in.predicates = append(in.predicates, p...) }
func (p Predicates) applyToWatches(in *watchInput) { in.predicates = append(in.predicates, p...) }

type onlyMetadata struct{}

// OnlyMetadata watches and caches the objects' metadata only
// (metav1.PartialObjectMetadata), as controller-runtime's builder.OnlyMetadata: read
// them with a PartialObjectMetadata of their kind. Not for a sharded controller's For.
var OnlyMetadata onlyMetadata

func (onlyMetadata) applyToFor(in *watchInput)     { in.metadata = true }
func (onlyMetadata) applyToOwns(in *watchInput)    { in.metadata = true }
func (onlyMetadata) applyToWatches(in *watchInput) { in.metadata = true }

type matchEveryOwner struct{}

// MatchEveryOwner makes Owns enqueue every owner of For's type, not only the
// controller owner.
var MatchEveryOwner matchEveryOwner

func (matchEveryOwner) applyToOwns(in *watchInput) { in.everyOwner = true }
