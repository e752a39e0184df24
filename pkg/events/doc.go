// Package events is Baton's in-process event bus: a generic, domain-agnostic
// publish/subscribe hub with per-subscriber buffers, drop accounting,
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
//	ch := busevents.Subscribe[*events.ConfigValidatedEvent](ctx, bus, "config-watcher", 64)
//	bus.Start()
//	bus.Publish(ev)
//
// Subscribe[T] is the one way to subscribe. T says what the channel
// carries: a concrete event type routes by that type's EventType; an
// interface type such as Event receives every event, or, with
// Types("a", "b"), those types only. Options add the rest:
//
//   - LatestValue(types...): state for which the newest version must
//     always arrive (see Expected subscriber behavior); with no type, the
//     types the subscription receives.
//   - Critical(onDrop): a subscriber that must not lose events; each drop
//     is logged and reported.
//   - LeaderOnly(): made after Start by a leader-only component. A context
//     from WithLeaderOnly makes every subscription under it leader-only;
//     the lifecycle Manager gives one to each leader-only component, so
//     their authors need not remember the option.
//
// The subscription ends, and the bus closes the channel exactly once, when
// ctx ends, on Unsubscribe[T] or on Stop; readers range over the channel
// and never close it. Arguments no subscription can have (an empty name, a
// buffer below 1, a LatestValue type it does not receive, an empty type
// list) make Subscribe panic with an error wrapping ErrInvalidSubscription,
// naming what was wrong. The methods Subscribe, SubscribeTypes,
// SubscribeLeaderOnly and Unsubscribe are deprecated older forms, kept as
// thin wrappers over Subscribe[Event] and Unsubscribe[Event] so that
// existing callers keep working; new code uses Subscribe[T] with options.
// Whether a subscription is leader-only is decided by how its component is
// registered with the lifecycle Manager, not by the subscribe call.
//
// A component that subscribes afresh in every period of its work (a
// leader-only component, at the top of every term) still calls only
// Subscribe[T]: the runtime that runs it gives it a context carrying a
// Scope, which remembers the period's subscriptions by name and reuses
// their records in the next period, so that a period costs one channel
// per subscription. The channel is new in each period and closed at its
// end, as any Subscribe[T] channel is when its context is done; see Scope.
//
// Defined outcomes: before Start, Publish and Republish hold the event
// (up to the capacity given to NewEventBus) and return 0; Start delivers
// the held events in order, and those published or republished while it
// does, then goes live. When the held events reach the capacity, an event
// of a type some subscriber declared LatestValue takes the place of the
// oldest held event of its own type, else of the oldest held event of a
// type nobody declared LatestValue, else of the oldest held event; an event
// of any other type is dropped. Every event dropped is counted in
// Stats().PreStartDropped. After Stop, Publish and Republish return 0 and
// count the event in Stats().RejectedStopped, subscriptions get a closed
// channel, Request returns ErrStopped, and held events are discarded and
// counted. A nil or typed-nil event (see IsNil) is never delivered:
// Publish and Republish count it in Stats().RejectedNil, Request returns
// ErrNilEvent.
//
// # Ordering and replays
//
// The bus stamps every publish with its current sequence number and
// remembers, per subscriber and event type, the newest stamp it delivered.
// NextSequence advances the sequence: a replayer stamps the state it caches
// with it. Republish delivers such an event only to subscribers that have
// not received an event of that type published after it was stamped, so a
// replay can never overtake newer state.
//
// # Concurrency properties
//
// All functions and methods are safe for concurrent use. Once the bus is
// started, Publish takes no bus-wide lock: it finds its event type's topic
// in a copy-on-write table read atomically, takes the topic's lock once,
// then makes a non-blocking send to each subscriber of the type.
// Subscribing and unsubscribing take the bus's lock and change only the
// topics of the types concerned, under their locks; the table is copied
// only for an event type seen for the first time or a subscription to
// every type, so a subscriber that comes and goes every term costs a few
// allocations (its subscription, its channel and the watch on its context)
// and no copy. Publishes of one event type are serialized; of different
// types, they run in parallel. Events from one goroutine reach each subscriber in the order
// they were published; events published concurrently by several goroutines
// have no defined order. Drop callbacks run on the publishing goroutine,
// with no lock of the bus held, and must not block. A LatestValue
// subscription owns one goroutine once an event has found its channel
// full, which ends when the subscription does.
//
// # Cost
//
// A publish costs what the plainest fan-out does (a mutex-guarded slice of
// buffered channels, each sent to without blocking) plus a constant: the
// check for a nil event (a load and a compare once its Go type has been
// seen), the lookup of its type's topic and one counter. Nothing is read or
// written per subscriber beyond the send itself: while every subscriber of
// the type has room in its buffer and is a plain subscription (on chan
// Event, or on another type T, which adds one type assertion per run of
// subscribers of that T, not one per send), a publish walks one array of
// channels under the topic's lock, and each subscription's Delivered count
// is derived from the topic's count of publishes (frozen when the
// subscription leaves the topic). It grows with the number of subscribers
// that want the event type, not with all subscribers, and allocates
// nothing, whether the event is queued, dropped, or makes room by evicting
// older state.
//
// A LatestValue subscription that keeps up takes the same direct send
// (its route is found through the topic's list, one pointer more). Other
// deliveries take the checked path, which reads and writes the
// subscription's state: to a subscriber whose buffer is full (counted as a
// drop, and reported outside the lock for a Critical one), to a
// LatestValue subscription whose buffer is full (a newer version replaces
// the waiting one in constant time), and every Republish (each
// subscriber's newest stamp is checked).
//
// The benchmarks measure each figure beside its baseline in the same run,
// taking turns every few hundred events: BenchmarkCompareFanOut (draining
// readers, where the scheduler's wake-ups dominate and the two are within
// the run-to-run spread of each other, which BenchmarkCompareNoiseFloor
// measures with two identical plain buses), BenchmarkComparePublishCost
// (the publish path alone: the constant shows at one subscriber and fades
// as subscribers are added), BenchmarkCompareSend (one subscriber against
// a bare channel send), BenchmarkCompareLatestValue and
// BenchmarkLatestValueEviction.
//
// # Expected subscriber behavior
//
// Read promptly and size the buffer for bursts: Publish never blocks, so a
// subscriber whose buffer is full loses the event, for that subscriber
// only, counted per subscriber and event type in Stats. A lossy subscriber
// (the default, for observability) is only counted; a Critical one is also
// warned about and its drop callback called. A subscriber that never reads
// loses events, counted, but never slows the publisher or other
// subscribers, and Stop still ends it.
//
// Declare state types with LatestValue. While such a subscriber keeps up,
// its events go straight to its channel; once its buffer is full they wait
// inside the bus, where a newer version of a state type replaces the
// waiting one (counted as Skipped) and, when that queue is full too, state
// takes the place of the oldest waiting event of another type (counted as
// Dropped). The subscriber therefore always ends with the newest version of
// each LatestValue type, and sees events in the order they were published,
// less the ones removed.
//
// # Testing
//
// Package eventstest has what a test of code on the bus needs: a Watcher
// that records a bus's events for the test, Expect, ExpectExactly and
// ExpectNone to assert on them with a deadline, Inject to publish as a
// peer would, and Bubble to run a test in a testing/synctest bubble around a
// started bus, so that deadlines pass in fake time and goroutines that
// outlive the test are reported.
package events
