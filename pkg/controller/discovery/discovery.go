package discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// Name is the component name of a Discovery.
const Name = "discovery"

// Errors of the package.
var (
	// ErrAlreadyStarted is returned by a second call to Start.
	ErrAlreadyStarted = errors.New("discovery: already started")
	// ErrNotSimulated is returned by the simulated setters of a Discovery
	// made with NewCluster.
	ErrNotSimulated = errors.New("discovery: not a simulated discovery")
	// ErrPodNotFound is returned by RemovePod for a pod not in the set.
	ErrPodNotFound = errors.New("discovery: pod not found")
	// ErrInvalidPod wraps the errors of pods the simulated setters refuse.
	ErrInvalidPod = errors.New("discovery: invalid pod")
)

// Options configure a Discovery.
type Options struct {
	// Logger receives the component's log lines; nil means slog.Default().
	Logger *slog.Logger
}

// Discovery publishes the set of target pods. Create one with NewCluster or
// NewSimulated; it is a lifecycle.Component to register as all-replica.
type Discovery struct {
	bus      *busevents.EventBus
	logger   *slog.Logger
	replayer *leadership.StateReplayer[*events.HAProxyPodsDiscoveredEvent]

	// Cluster mode; clientset is nil in simulated mode.
	clientset kubernetes.Interface
	namespace string
	selector  labels.Selector

	changed chan struct{} // capacity 1: "the set may have changed"
	started atomic.Bool
	synced  atomic.Bool

	// mu guards sim, the simulated set by namespace/name.
	mu  sync.Mutex
	sim map[string]config.Pod

	// Only Start's goroutine touches these.
	last       []config.Pod
	generation uint64
}

// NewCluster returns a Discovery of the pods matching labelSelector (label
// selector syntax, for example "app=haproxy"; it must not be empty) in
// namespace.
func NewCluster(bus *busevents.EventBus, clientset kubernetes.Interface, namespace, labelSelector string, opts Options) (*Discovery, error) {
	if clientset == nil {
		return nil, errors.New("discovery: clientset is nil")
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, fmt.Errorf("discovery: namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if strings.TrimSpace(labelSelector) == "" {
		return nil, errors.New("discovery: label selector is empty; it would select every pod in the namespace")
	}
	sel, err := labels.Parse(labelSelector)
	if err != nil {
		return nil, fmt.Errorf("discovery: label selector %q: %w", labelSelector, err)
	}
	d, err := newDiscovery(bus, opts)
	if err != nil {
		return nil, err
	}
	d.clientset, d.namespace, d.selector = clientset, namespace, sel
	return d, nil
}

// NewSimulated returns a Discovery of a simulated pod set that starts as
// initial. Each pod needs a name and a namespace, an IP (if set) that
// parses, and no two may share namespace and name.
func NewSimulated(bus *busevents.EventBus, initial []config.Pod, opts Options) (*Discovery, error) {
	set, err := podSet(initial)
	if err != nil {
		return nil, err
	}
	d, err := newDiscovery(bus, opts)
	if err != nil {
		return nil, err
	}
	d.sim = set
	return d, nil
}

func newDiscovery(bus *busevents.EventBus, opts Options) (*Discovery, error) {
	if bus == nil {
		return nil, errors.New("discovery: bus is nil")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("component", Name)
	return &Discovery{
		bus:      bus,
		logger:   logger,
		replayer: leadership.NewStateReplayer[*events.HAProxyPodsDiscoveredEvent](bus).WithLogger(logger),
		changed:  make(chan struct{}, 1),
	}, nil
}

// Name returns "discovery".
func (d *Discovery) Name() string { return Name }

// Start publishes the current set and then each change until ctx ends, and
// returns nil then, after the informer (cluster mode) stopped. It returns
// ErrAlreadyStarted when called twice.
func (d *Discovery) Start(ctx context.Context) error {
	if !d.started.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	list := d.simulated
	if d.clientset != nil {
		informer, err := d.informer()
		if err != nil {
			return err
		}
		runDone := make(chan struct{})
		go func() {
			defer close(runDone)
			informer.RunWithContext(ctx)
		}()
		defer func() { <-runDone }()
		if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
			return nil // ctx ended
		}
		list = func() []config.Pod { return fromStore(informer.GetStore()) }
	}
	for {
		d.publishIfChanged(list())
		select {
		case <-ctx.Done():
			return nil
		case <-d.changed:
		}
	}
}

func (d *Discovery) informer() (cache.SharedIndexInformer, error) {
	pods := d.clientset.CoreV1().Pods(d.namespace)
	selector := d.selector.String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return pods.Watch(ctx, o)
		},
	}
	informer := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { d.notify() },
		UpdateFunc: func(any, any) { d.notify() },
		DeleteFunc: func(any) { d.notify() },
	}); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	return informer, nil
}

func (d *Discovery) notify() {
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

// publishIfChanged publishes pods, sorted, as the next generation unless
// they equal the last set published. It runs on Start's goroutine only.
func (d *Discovery) publishIfChanged(pods []config.Pod) {
	sortPods(pods)
	if d.generation > 0 && slices.Equal(pods, d.last) {
		return
	}
	d.generation++
	d.last = pods
	ev := events.NewHAProxyPodsDiscoveredEvent(slices.Clone(pods), d.generation)
	d.synced.Store(true) // before Publish: a subscriber that got the event sees Synced
	d.replayer.Publish(ev)
	ready := 0
	for _, p := range pods {
		if p.Ready {
			ready++
		}
	}
	d.logger.Info("pods discovered", "generation", d.generation, "pods", len(pods), "ready", ready)
}

// fromStore converts the informer's pods.
func fromStore(s cache.Store) []config.Pod {
	objs := s.List()
	out := make([]config.Pod, 0, len(objs))
	for _, o := range objs {
		p, ok := o.(*corev1.Pod)
		if !ok {
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, config.Pod{
			Namespace: p.Namespace,
			Name:      p.Name,
			IP:        p.Status.PodIP,
			Ready:     podReady(p),
		})
	}
	return out
}

// podReady is the Ready condition, false for a terminating pod or one
// without an IP.
func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func sortPods(pods []config.Pod) {
	slices.SortFunc(pods, func(a, b config.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}

// Synced reports whether the first set was published: at Start in
// simulated mode, once the informer synced in cluster mode. It is the
// all-replica side's readiness for /readyz.
func (d *Discovery) Synced() bool { return d.synced.Load() }

// Current returns the last event published, and false before any.
func (d *Discovery) Current() (*events.HAProxyPodsDiscoveredEvent, bool) { return d.replayer.Get() }

// Replayer returns the replayer of the last HAProxyPodsDiscoveredEvent, to
// register with the runtime (lifecycle.Manager.AddReplayer).
func (d *Discovery) Replayer() *leadership.StateReplayer[*events.HAProxyPodsDiscoveredEvent] {
	return d.replayer
}

// simulated returns the simulated set.
func (d *Discovery) simulated() []config.Pod {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]config.Pod, 0, len(d.sim))
	for _, p := range d.sim {
		out = append(out, p)
	}
	return out
}

// SetPod adds p to the simulated set, or replaces the pod of the same
// namespace and name. It returns ErrNotSimulated in cluster mode and an
// error wrapping ErrInvalidPod for a pod NewSimulated would refuse.
func (d *Discovery) SetPod(p config.Pod) error {
	if err := checkPod("pod", p); err != nil {
		return err
	}
	return d.change(func(set map[string]config.Pod) error {
		set[key(p)] = p
		return nil
	})
}

// SetPods replaces the simulated set with pods, checked as by NewSimulated.
func (d *Discovery) SetPods(pods []config.Pod) error {
	set, err := podSet(pods)
	if err != nil {
		return err
	}
	return d.change(func(m map[string]config.Pod) error {
		clear(m)
		for k, p := range set {
			m[k] = p
		}
		return nil
	})
}

// RemovePod removes a pod from the simulated set; ErrPodNotFound if it is
// not there.
func (d *Discovery) RemovePod(namespace, name string) error {
	return d.change(func(set map[string]config.Pod) error {
		k := namespace + "/" + name
		if _, ok := set[k]; !ok {
			return fmt.Errorf("%w: %s", ErrPodNotFound, k)
		}
		delete(set, k)
		return nil
	})
}

func (d *Discovery) change(fn func(map[string]config.Pod) error) error {
	if d.clientset != nil {
		return ErrNotSimulated
	}
	d.mu.Lock()
	err := fn(d.sim)
	d.mu.Unlock()
	if err == nil {
		d.notify()
	}
	return err
}

func key(p config.Pod) string { return p.Namespace + "/" + p.Name }

// CheckPods checks a pod set as NewSimulated and SetPods do: each pod needs
// a namespace and a name, unique together, and an IP that parses if it has
// one. The error wraps ErrInvalidPod and names the entry (pods[i]).
func CheckPods(pods []config.Pod) error {
	first := make(map[string]int, len(pods))
	for i, p := range pods {
		field := fmt.Sprintf("pods[%d]", i)
		if err := checkPod(field, p); err != nil {
			return err
		}
		if j, dup := first[key(p)]; dup {
			return fmt.Errorf("%w: %s: duplicate pod %s (also pods[%d])", ErrInvalidPod, field, key(p), j)
		}
		first[key(p)] = i
	}
	return nil
}

func podSet(pods []config.Pod) (map[string]config.Pod, error) {
	if err := CheckPods(pods); err != nil {
		return nil, err
	}
	set := make(map[string]config.Pod, len(pods))
	for _, p := range pods {
		set[key(p)] = p
	}
	return set, nil
}

func checkPod(field string, p config.Pod) error {
	switch {
	case p.Namespace == "":
		return fmt.Errorf("%w: %s.namespace: must not be empty", ErrInvalidPod, field)
	case p.Name == "":
		return fmt.Errorf("%w: %s.name: must not be empty", ErrInvalidPod, field)
	case p.IP != "" && net.ParseIP(p.IP) == nil:
		return fmt.Errorf("%w: %s.ip: %q is not an IP address", ErrInvalidPod, field, p.IP)
	}
	return nil
}
