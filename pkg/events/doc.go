// Package events is Baton's in-process event bus: typed publish/subscribe
// with a buffer per subscriber, drop accounting, latest-value delivery of
// state and ordered replays. Import it as busevents.
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
//   - LatestValue(types...): state of which the newest version must
//     always arrive (see Expected subscriber behavior); with no type, the
//     types the subscription receives.
//   - Critical(onDrop): a subscriber that must not lose events; each drop
//     is logged and reported.
//
// The subscription ends, and the bus closes the channel exactly once, when
// ctx is done, on Unsubscribe[T] or on Stop; readers never close it. A
// component that works in periods (a leader-only component, one term after
// another, under a context from WithLeaderOnly) subscribes at the top of each
// under that period's context, and gets a new channel that closes when the
// period ends. Subscribe panics on arguments no subscription can have.
//
// # Before Start and after Stop
//
// Before Start, Publish and Republish hold the event (up to the capacity given to
// NewEventBus; past it, state of a LatestValue type is kept before other events)
// and return 0; Start delivers the held events in order. After Stop, they return 0,
// and subscriptions get a closed channel. A nil or typed-nil event (see IsNil) is
// never delivered. Stats counts every event held back, dropped or rejected.
//
// # Ordering and replays
//
// NextSequence stamps state that a replayer caches; Republish delivers such an
// event only to subscribers that have not been given one of its type published
// after the stamp, so a replay can never overtake newer state.
//
// The design notes (why a bus, what is kept before Start, how sequences and a
// publish work) are in docs/design/events.md in the repository.
//
// # Concurrency properties
//
// All functions and methods are safe for concurrent use. Publishes of one event
// type are serialized; of different types, they run in parallel, and a publish
// costs in proportion to the subscribers of its type, not to all subscribers.
//
// Events from one goroutine reach each subscriber in the order they were
// published; events published concurrently by several goroutines have no
// defined order. Drop callbacks run on the publishing goroutine, with no
// lock of the bus held, and must not block. A LatestValue subscription
// owns one goroutine once an event has found its channel full, which ends
// when the subscription does.
//
// Less formally: a publish hands its event to each subscriber of the type
// in turn and waits for none of them. What one goroutine publishes, every
// subscriber sees in that order, minus what it could not take; a
// subscriber that falls behind loses events, and only it does; a
// subscriber of state never loses the newest version; and a replay never
// hands anyone older state than they already have.
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
