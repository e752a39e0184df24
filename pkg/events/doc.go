// Package events is Baton's in-process event bus: a generic, domain-agnostic
// publish/subscribe hub with per-subscriber backpressure, drop accounting,
// latest-value delivery of state, ordered replays and scatter-gather
// requests. It knows nothing about leadership or Kubernetes; the events
// that ride on it are defined by its users (the core's leadership and lifecycle
// events in pkg/controller/leadership and pkg/controller/lifecycle, the
// reference controller's catalog in pkg/controller/events). Import it as
// busevents.
//
// # Usage
//
// Create a bus, subscribe the components that must see every event, then
// Start it:
//
//	bus := busevents.NewEventBus(1024)
//	ch := bus.SubscribeTypes("config-publisher", 64, []string{"config.validated"})
//	bus.Start()
//	bus.Publish(ev)
//
// Events published before Start are held (up to the capacity given to
// NewEventBus) and delivered in order by Start, so components that subscribe
// during setup miss nothing. Components that only run on the elected leader
// subscribe later, with SubscribeLeaderOnly, and get the state they need
// through a replay (see pkg/controller/leadership).
//
// # Subscriptions
//
// Every subscription has a name, used in drop accounting and logs, and a
// buffer. The forms are: Subscribe (every event), SubscribeTypes (only the
// given event types, filtered by the bus), the generic Subscribe[T] (events
// of Go type T on a chan T, ended by a context) and SubscribeLeaderOnly. The
// bus closes a subscription's channel exactly once: on Unsubscribe, when the
// context of a Subscribe[T] ends, or on Stop. Readers therefore range over the
// channel and never close it themselves.
//
// # Backpressure
//
// Publish never blocks. When a subscriber's buffer is full the event is
// dropped for that subscriber only and counted per subscriber and event type.
// A lossy subscriber (the default, for observability) is only counted; a
// Critical subscriber also has its drop callback called and a warning logged.
// A subscriber that declares LatestValue types never loses the newest event
// of those types: when its buffer is full, an older event already queued for
// it (a superseded version of a state type, or else the oldest event of a
// type not declared) is removed to make room.
//
// # Ordering and replays
//
// The bus stamps every publish with its current sequence number and
// remembers, per subscriber and event type, the newest stamp it delivered.
// NextSequence advances the sequence: a replayer stamps the state it caches
// with it. Republish delivers such an event only to subscribers that have not
// received an event of that type published after it was stamped, so a replay
// can never overtake newer state.
//
// # Concurrency properties
//
// All methods are safe for concurrent use. Publish takes no bus-wide lock once
// the bus is started: routing is a copy-on-write table read atomically, and
// each delivery takes only the receiving subscriber's own mutex, for a
// non-blocking send. The cost of a publish grows with the number of
// subscribers that want its event type, not with all subscribers. Events
// from one goroutine reach each subscriber in the order they were published;
// events published concurrently by several goroutines have no defined order.
// Drop callbacks run on the publishing goroutine and must not block.
//
// # Expected subscriber behavior
//
// Read promptly, size the buffer for bursts, and declare state types with
// LatestValue. A subscriber that never reads loses events, counted, but never
// slows down the publisher or other subscribers.
package events
