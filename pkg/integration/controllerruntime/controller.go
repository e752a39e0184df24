package controllerruntime

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Controller describes a leader-only controller-runtime controller. The Runtime builds
// it anew at the start of each term (controller.NewUnmanaged, since a controller cannot
// be started twice), on the manager's shared cache, and stops it when the term ends.
type Controller struct {
	// Name names the controller in logs and metrics. Required, unique in the Runtime.
	Name string
	// Reconciler is called with a context that carries the term (termctx.FromContext) and
	// ends with it. Required. It is shared by the terms; keep per-term state out of it.
	Reconciler reconcile.Reconciler
	// Watches are the controller's sources, on the manager's cache. At least one. Their
	// informers are synced on every replica before it campaigns, so a new leader's
	// first reconcile needs no list.
	Watches []Watch
	// Options are the controller's options. Reconciler is taken from the field above,
	// SkipNameValidation is set (each term builds the controller under the same name),
	// Logger defaults to the Runtime's; NeedLeaderElection and EnableWarmup are ignored:
	// the Runtime decides when the controller runs, and keeps every replica warm.
	Options controller.Options
}

// Watch is one source of a Controller: events of Object's type from the manager's cache.
type Watch struct {
	// Object is the type to watch, e.g. &corev1.ConfigMap{}. Required.
	Object client.Object
	// Handler maps events to requests; nil means handler.EnqueueRequestForObject.
	Handler handler.EventHandler
	// Predicates filter the events.
	Predicates []predicate.Predicate
}

// AddController registers c to run on the leader, built anew each term.
func (r *Runtime) AddController(c Controller) error {
	if c.Reconciler == nil {
		return fmt.Errorf("%w: controller %q has no Reconciler", ErrInvalidRegistration, c.Name)
	}
	if len(c.Watches) == 0 {
		return fmt.Errorf("%w: controller %q has no Watches; add at least one Watch{Object: ...}", ErrInvalidRegistration, c.Name)
	}
	for i, w := range c.Watches {
		if w.Object == nil {
			return fmt.Errorf("%w: controller %q: Watches[%d].Object is nil", ErrInvalidRegistration, c.Name, i)
		}
	}
	if err := r.needElection(fmt.Sprintf("controller %q", c.Name)); err != nil {
		return err
	}
	if err := r.claim(c.Name); err != nil {
		return err
	}
	opts := c.Options
	opts.Reconciler = c.Reconciler
	opts.SkipNameValidation = ptr.To(true)
	opts.NeedLeaderElection, opts.EnableWarmup = nil, ptr.To(true)
	if opts.Logger.GetSink() == nil {
		opts.Logger = r.logger
	}
	r.mu.Lock()
	comp := &controllerComponent{r: r, spec: c, opts: opts}
	r.controllers = append(r.controllers, comp)
	r.mu.Unlock()
	if err := r.life.AddLeaderOnly(comp); err != nil {
		return wrapRegistration(err)
	}
	r.leaderOnly.Add(1)
	return nil
}

// controllerComponent runs one term's instance of a Controller. Between terms it holds
// the next instance, built and warmed: its sources run on the shared cache and fill its
// queue, so that at election only the workers have to start.
type controllerComponent struct {
	r    *Runtime
	spec Controller
	opts controller.Options

	// mu guards next.
	mu   sync.Mutex
	next *warmController
}

// warmController is a controller whose sources run under a context of its own.
type warmController struct {
	ctrl   controller.Controller
	cancel context.CancelFunc
}

// warmupper is the warm-up half of controller-runtime's controller (EnableWarmup).
type warmupper interface {
	Warmup(ctx context.Context) error
}

func (c *controllerComponent) Name() string { return c.spec.Name }

// prepare builds an instance and starts its sources under a child of ctx, the
// Runtime's context; it returns once they synced.
func (c *controllerComponent) prepare(ctx context.Context) (*warmController, error) {
	ctrl, err := controller.NewUnmanaged(c.spec.Name, c.opts)
	if err != nil {
		return nil, fmt.Errorf("controllerruntime: building controller %q: %w", c.spec.Name, err)
	}
	cache := c.r.mgr.GetCache()
	for _, w := range c.spec.Watches {
		h := w.Handler
		if h == nil {
			h = &handler.EnqueueRequestForObject{}
		}
		obj := w.Object.DeepCopyObject().(client.Object)
		if err := ctrl.Watch(source.Kind(cache, obj, h, w.Predicates...)); err != nil {
			return nil, fmt.Errorf("controllerruntime: controller %q: watching %T: %w", c.spec.Name, w.Object, err)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	if wu, ok := ctrl.(warmupper); ok {
		if err := wu.Warmup(wctx); err != nil {
			cancel()
			return nil, fmt.Errorf("controllerruntime: warming controller %q: %w", c.spec.Name, err)
		}
	}
	return &warmController{ctrl: ctrl, cancel: cancel}, nil
}

// warm prepares the next instance, replacing none that exists.
func (c *controllerComponent) warm(ctx context.Context) error {
	c.mu.Lock()
	have := c.next != nil
	c.mu.Unlock()
	if have {
		return nil
	}
	w, err := c.prepare(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.next = w
	c.mu.Unlock()
	return nil
}

// Start runs the warmed instance (or a new one) until the term ends, then warms the
// instance of the next term before it returns.
func (c *controllerComponent) Start(ctx context.Context) error {
	Subscribed(ctx) // a controller takes no replayed events
	base := c.r.baseContext()
	if err := c.warm(base); err != nil {
		return err
	}
	c.mu.Lock()
	w := c.next
	c.next = nil
	c.mu.Unlock()
	// The term's end stops the sources too; the workers then drain and return.
	stop := context.AfterFunc(ctx, w.cancel)
	err := w.ctrl.Start(ctx)
	stop()
	w.cancel()
	if base.Err() == nil {
		if werr := c.warm(base); werr != nil {
			c.r.logger.Error(werr, "warming the next term's controller; it is built at election instead", "controller", c.spec.Name)
		}
	}
	if ctx.Err() != nil || err == nil {
		return ctx.Err() // nil while ctx is live: the runtime records an early return
	}
	return fmt.Errorf("controllerruntime: controller %q stopped: %w", c.spec.Name, err)
}
