package reconciler

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/pkg/controller/events"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// Defaults for ReconcilerOptions.
const (
	DefaultDebounce = 100 * time.Millisecond
	DefaultMaxDelay = time.Second
	DefaultBuffer   = 64
)

// Trigger reasons.
const (
	// ReasonBecameLeader is the reason of the trigger published by
	// TriggerNow at the start of a term.
	ReasonBecameLeader = "became leader"
	// ReasonInputsChanged prefixes the reason of a debounced trigger.
	ReasonInputsChanged = "inputs changed"
)

// ReconcilerOptions configure a Reconciler. The zero value takes the
// defaults written on each field.
type ReconcilerOptions struct {
	// Debounce is the quiet time after the last change before a trigger is
	// published, so that a burst of changes gives one trigger; zero means
	// DefaultDebounce (100ms). Negative is invalid.
	Debounce time.Duration
	// MaxDelay bounds how long a trigger may be held back by a stream of
	// changes that never goes quiet: a trigger is published at most MaxDelay
	// after the first change it covers. Zero means DefaultMaxDelay (1s), or
	// Debounce if that is longer; it must not be shorter than Debounce.
	MaxDelay time.Duration
	// Buffer is the size of the change subscription; zero means
	// DefaultBuffer (64). The newest change of each type is never lost
	// (LatestValue); a smaller buffer only skips superseded ones.
	// Negative is invalid.
	Buffer int
	// Logger receives the log lines; nil means slog.Default().
	Logger *slog.Logger
}

func (o ReconcilerOptions) withDefaults() (ReconcilerOptions, error) {
	switch {
	case o.Debounce < 0:
		return o, fmt.Errorf("%w: debounce %s is negative", ErrInvalidOptions, o.Debounce)
	case o.MaxDelay < 0:
		return o, fmt.Errorf("%w: maxDelay %s is negative", ErrInvalidOptions, o.MaxDelay)
	case o.Buffer < 0:
		return o, fmt.Errorf("%w: buffer %d is negative", ErrInvalidOptions, o.Buffer)
	}
	if o.Debounce == 0 {
		o.Debounce = DefaultDebounce
	}
	if o.MaxDelay == 0 {
		o.MaxDelay = max(DefaultMaxDelay, o.Debounce)
	}
	if o.MaxDelay < o.Debounce {
		return o, fmt.Errorf("%w: maxDelay %s is shorter than debounce %s", ErrInvalidOptions, o.MaxDelay, o.Debounce)
	}
	if o.Buffer == 0 {
		o.Buffer = DefaultBuffer
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// ReconcilerStats counts what a Reconciler did.
type ReconcilerStats struct {
	// Changes are the change events that counted: a configuration version
	// or pod generation not seen before.
	Changes uint64
	// Unchanged are change events ignored because they repeated the last
	// version or generation seen (a replay, a re-validation of the same
	// content).
	Unchanged uint64
	// Debounced are the triggers published for changes; Immediate those
	// published by TriggerNow.
	Debounced uint64
	Immediate uint64
	// Pending is true while changes wait for their trigger.
	Pending bool
	// ConfigVersion and PodGeneration are the newest seen.
	ConfigVersion string
	PodGeneration uint64
}

// Reconciler is the all-replica component that turns change events
// (ConfigValidatedEvent, HAProxyPodsDiscoveredEvent) into debounced
// ReconciliationTriggeredEvents, and triggers a fresh reconciliation at the
// start of every term (TriggerNow). It runs on every replica; its triggers
// only matter on the leader, where the Coordinator consumes them. Create it
// with NewReconciler.
type Reconciler struct {
	bus    *busevents.EventBus
	opts   ReconcilerOptions
	logger *slog.Logger
	// ch is the change subscription made by NewReconciler; the bus closes
	// it, on Unsubscribe when Start returns or when the bus stops.
	ch      <-chan busevents.Event
	started atomic.Bool

	// mu guards stats.
	mu    sync.Mutex
	stats ReconcilerStats
}

// NewReconciler returns a Reconciler and subscribes it, at once, to the
// change events on bus. It must therefore be called before bus.Start: it
// returns ErrBusStarted otherwise. The subscription lasts until Start
// returns (or the bus stops).
func NewReconciler(bus *busevents.EventBus, opts ReconcilerOptions) (*Reconciler, error) {
	if bus == nil {
		return nil, ErrNilBus
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if bus.Started() {
		return nil, ErrBusStarted
	}
	r := &Reconciler{bus: bus, opts: opts, logger: opts.Logger}
	// For the life of the process: Start's Unsubscribe or Stop ends it.
	r.ch = busevents.Subscribe[busevents.Event](context.Background(), bus, r.Name(), opts.Buffer,
		busevents.Types(events.EventTypeConfigValidated, events.EventTypeHAProxyPodsDiscovered),
		busevents.LatestValue())
	return r, nil
}

// Name returns "reconciler".
func (r *Reconciler) Name() string { return "reconciler" }

// Options returns the options in force, defaults applied.
func (r *Reconciler) Options() ReconcilerOptions { return r.opts }

// Stats returns a snapshot of the counters.
func (r *Reconciler) Stats() ReconcilerStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// TriggerNow publishes a ReconciliationTriggeredEvent with reason
// ReasonBecameLeader at once, on the caller's goroutine. It is the term
// hook the command registers with lifecycle.Manager.AddTermHook after the
// replayers, so that a new leader renders afresh from the replayed state
// instead of replaying a stale render. It does not touch a debounced
// trigger in progress (that one is published too, and the Coordinator
// coalesces). Safe for concurrent use; it never blocks.
func (r *Reconciler) TriggerNow(term uint64) {
	r.mu.Lock()
	r.stats.Immediate++
	r.mu.Unlock()
	r.logger.LogAttrs(context.Background(), slog.LevelInfo, "triggering a fresh reconciliation", // once per term: no attribute allocations
		slog.Uint64("term", term), slog.String("reason", ReasonBecameLeader))
	r.bus.Publish(events.NewReconciliationTriggeredEvent(ReasonBecameLeader))
}

// Start debounces changes into triggers until ctx is done, then
// unsubscribes and returns nil; a change still waiting for its trigger is
// dropped then. It returns ErrSubscriptionClosed if the bus stopped first,
// and ErrAlreadyRunning if called more than once: the subscription is made
// once, by NewReconciler, for the life of the process.
func (r *Reconciler) Start(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer busevents.Unsubscribe(r.bus, r.ch)

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()

	var (
		pending bool
		first   time.Time // of the window
		changes int       // in the window
		lastVer string
		lastGen uint64
		seenGen bool
	)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-r.ch:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return ErrSubscriptionClosed
			}
			changed := false
			switch e := ev.(type) {
			case *events.ConfigValidatedEvent:
				changed = e.Version == "" || e.Version != lastVer
				lastVer = e.Version
			case *events.HAProxyPodsDiscoveredEvent:
				changed = !seenGen || e.Generation != lastGen
				lastGen, seenGen = e.Generation, true
			}
			now := time.Now()
			if changed {
				if !pending {
					pending, first, changes = true, now, 0
				}
				changes++
				// Quiet for Debounce, but never later than MaxDelay after
				// the window opened.
				wait := min(r.opts.Debounce, first.Add(r.opts.MaxDelay).Sub(now))
				timer.Reset(wait)
			}
			r.mu.Lock()
			if changed {
				r.stats.Changes++
			} else {
				r.stats.Unchanged++
			}
			r.stats.Pending = pending
			r.stats.ConfigVersion, r.stats.PodGeneration = lastVer, lastGen
			r.mu.Unlock()
		case <-timer.C:
			if !pending {
				continue
			}
			reason := fmt.Sprintf("%s (%d changes): config %q, pods generation %d", ReasonInputsChanged, changes, lastVer, lastGen)
			pending = false
			r.mu.Lock()
			r.stats.Debounced++
			r.stats.Pending = false
			r.mu.Unlock()
			r.logger.Debug("triggering reconciliation", "reason", reason, "waited", time.Since(first))
			r.bus.Publish(events.NewReconciliationTriggeredEvent(reason))
		}
	}
}
