package controllerruntime

import (
	"context"
	"fmt"

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
	// Reconciler is called with a context that carries the term (TermFromContext) and
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
	if err := r.claim(c.Name); err != nil {
		return err
	}
	opts := c.Options
	opts.Reconciler = c.Reconciler
	opts.SkipNameValidation = ptr.To(true)
	opts.NeedLeaderElection, opts.EnableWarmup = nil, nil
	if opts.Logger.GetSink() == nil {
		opts.Logger = r.logger
	}
	r.mu.Lock()
	for _, w := range c.Watches {
		r.watched = append(r.watched, w.Object)
	}
	r.mu.Unlock()
	return wrapRegistration(r.life.AddLeaderOnly(&controllerComponent{r: r, spec: c, opts: opts}))
}

// controllerComponent runs one term's instance of a Controller.
type controllerComponent struct {
	r    *Runtime
	spec Controller
	opts controller.Options
}

func (c *controllerComponent) Name() string { return c.spec.Name }

// Start builds the term's controller and runs it until the term ends.
func (c *controllerComponent) Start(ctx context.Context) error {
	ctx = withTermRef(ctx)
	Subscribed(ctx) // a controller takes no replayed events
	ctrl, err := controller.NewUnmanaged(c.spec.Name, c.opts)
	if err != nil {
		return fmt.Errorf("controllerruntime: building controller %q: %w", c.spec.Name, err)
	}
	cache := c.r.mgr.GetCache()
	for _, w := range c.spec.Watches {
		h := w.Handler
		if h == nil {
			h = &handler.EnqueueRequestForObject{}
		}
		obj := w.Object.DeepCopyObject().(client.Object)
		if err := ctrl.Watch(source.Kind(cache, obj, h, w.Predicates...)); err != nil {
			return fmt.Errorf("controllerruntime: controller %q: watching %T: %w", c.spec.Name, w.Object, err)
		}
	}
	err = ctrl.Start(ctx)
	if ctx.Err() != nil || err == nil {
		return ctx.Err() // nil while ctx is live: the runtime records an early return
	}
	return fmt.Errorf("controllerruntime: controller %q stopped: %w", c.spec.Name, err)
}
