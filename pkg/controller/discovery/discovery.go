package discovery

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/labels"
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

	// mu guards sim, the simulated set by namespace/name, and simVersion,
	// its version (SetPodsAt, or one up per change).
	mu         sync.Mutex
	sim        map[string]config.Pod
	simVersion uint64

	// Only Start's goroutine touches these.
	last       []config.Pod
	generation uint64
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
		list = func() ([]config.Pod, uint64) {
			// The version is read before the pods, so that it never
			// names a change the listed pods lack: a set that differs
			// from the last one always comes with a greater version.
			v := parseVersion(informer.LastSyncResourceVersion())
			return fromStore(informer.GetStore()), v
		}
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

func (d *Discovery) notify() {
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

// publishIfChanged publishes pods, sorted, unless they equal the last set
// published. Its generation is version, the version of the source the pods
// were read at, which every replica reading the same source agrees on; if
// that is not above the last generation published (a source without
// versions, a local change of a simulated set), it is the last one plus
// one, so generations only ever increase. It runs on Start's goroutine only.
func (d *Discovery) publishIfChanged(pods []config.Pod, version uint64) {
	sortPods(pods)
	if d.generation > 0 && slices.Equal(pods, d.last) {
		return
	}
	d.generation = max(version, d.generation+1)
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
	d.logger.Info("pods discovered", "generation", d.generation, "source_version", version, "pods", len(pods), "ready", ready)
}

// parseVersion reads a resourceVersion as a number, 0 if it is not one.
func parseVersion(rv string) uint64 {
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0
	}
	return v
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
