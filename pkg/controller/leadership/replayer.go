package leadership

import (
	"log/slog"
	"reflect"
	"sync"

	busevents "github.com/baton-dev/baton/pkg/events"
)

// StateReplayer caches the most recent event of type T and re-publishes it
// on demand. Create one with NewStateReplayer.
type StateReplayer[T busevents.Event] struct {
	bus    *busevents.EventBus
	name   string       // T's type name, for logs
	logger *slog.Logger // set by NewStateReplayer or WithLogger, before use

	// publishMu serialises Publish, so that the order in which the slot
	// takes events is the order in which the bus delivers them. It is held
	// across EventBus.Publish, which never blocks and calls back nothing of
	// the replayer's.
	publishMu sync.Mutex

	// mu guards slot, the cached event (nil when none).
	mu   sync.RWMutex
	slot *entry[T]
}

// entry is a cached event and the sequence it was stamped with.
type entry[T busevents.Event] struct {
	event T
	seq   uint64
}

// NewStateReplayer returns a replayer that re-publishes on bus. It panics,
// naming the argument, when bus is nil: a replayer without a bus is a
// programming error that must not surface only at the first failover.
// It logs through slog.Default() unless WithLogger gives it a logger.
func NewStateReplayer[T busevents.Event](bus *busevents.EventBus) *StateReplayer[T] {
	if bus == nil {
		panic("leadership: NewStateReplayer: bus is nil")
	}
	t := reflect.TypeFor[T]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return &StateReplayer[T]{bus: bus, name: t.Name(), logger: slog.Default()}
}

// WithLogger makes the replayer log through logger (nil: discard) and
// returns it. Call it right after NewStateReplayer, before the replayer is
// shared: it is the one way to give a replayer its logger.
func (r *StateReplayer[T]) WithLogger(logger *slog.Logger) *StateReplayer[T] {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r.logger = logger
	return r
}

// Cache stores event as the current state, replacing what was cached. A nil
// or typed-nil event is ignored: it is never cached, and what was cached
// stays. When calls race, the one that took the later bus sequence wins.
func (r *StateReplayer[T]) Cache(event T) {
	if busevents.IsNil(event) {
		r.logger.Warn("state replayer ignored a nil event", "type", r.name)
		return
	}
	r.store(event)
}

// store caches event, stamped with a new bus sequence. The stamp is taken
// under mu, so the slot always holds the event stamped last.
func (r *StateReplayer[T]) store(event T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.slot = &entry[T]{event: event, seq: r.bus.NextSequence()}
}

// load returns the cached entry, nil when none.
func (r *StateReplayer[T]) load() *entry[T] {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.slot
}

// Publish makes event the current state and publishes it, as one step:
// it caches event, stamped with a new bus sequence, and then publishes it,
// with concurrent Publish calls serialised, so that the cache and every
// subscriber agree on what is newest. It returns how many subscribers
// queued the event. A nil or typed-nil event is ignored (nothing cached,
// nothing published) and 0 returned.
//
// It is the one way state should go out (see docs/design/leadership.md,
// # The rule): a leader-only subscriber made at any moment then ends up holding
// the newest state.
func (r *StateReplayer[T]) Publish(event T) int {
	if busevents.IsNil(event) {
		r.logger.Warn("state replayer ignored a nil event", "type", r.name)
		return 0
	}
	r.publishMu.Lock()
	defer r.publishMu.Unlock()
	r.store(event)
	return r.bus.Publish(event)
}

// Replay re-publishes the cached event to every subscriber of its type that
// does not already hold newer state of that type, and reports whether there
// was anything cached. It logs "replaying <Type>" when it replays.
func (r *StateReplayer[T]) Replay() bool {
	e := r.load()
	if e == nil {
		return false
	}
	n := r.bus.Republish(e.event, e.seq)
	r.logger.Info("replaying "+r.name, "type", e.event.EventType(), "subscribers", n)
	return true
}

// HasState reports whether an event is cached.
func (r *StateReplayer[T]) HasState() bool { return r.load() != nil }

// Get returns the cached event without replaying it, and false when nothing
// is cached.
func (r *StateReplayer[T]) Get() (T, bool) {
	e := r.load()
	if e == nil {
		var zero T
		return zero, false
	}
	return e.event, true
}
