// Package leadership holds helpers for the controller's split between
// all-replica components (run on every replica) and leader-only components
// (run only on the elected leader).
//
// # The problem
//
// Leader-only components subscribe to the event bus after all-replica
// components have already published the state they need (configuration
// validated, pods discovered). A new leader's components would have no
// events queued and sit idle until the next change.
//
// # StateReplayer
//
// StateReplayer[T] keeps the most recent event of type T that an all-replica
// component cached, and re-publishes it on request (on BecameLeaderEvent) so
// the new leader's components get current state at once:
//
//	configReplayer := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus)
//	bus.Publish(validated)         // and, in either order,
//	configReplayer.Cache(validated)
//	...
//	configReplayer.Replay()        // on BecameLeaderEvent
//
// The cache is a single slot: a new leader needs the current state, not a
// history. Render and validation events are not replayed: the leader renders
// afresh on BecameLeaderEvent (see pkg/controller/reconciler).
//
// # Ordering
//
// Cache stamps the event with the bus's sequence (EventBus.NextSequence), and
// Replay goes through EventBus.Republish, which skips every subscriber that
// already received an event of type T stamped at or after it. So a replay
// racing a newer publish never reaches a subscriber after that newer event,
// and a subscriber that existed when Replay was called ends up holding state
// at least as new as the state cached at that moment.
//
// # Leadership events
//
// The events that carry leadership over the bus are defined here, in the
// core: LeaderElectionStartedEvent, BecameLeaderEvent, LostLeadershipEvent
// and NewLeaderObservedEvent. The election adapter (pkg/controller/leaderelection)
// publishes them and the controller runtime (pkg/controller/lifecycle)
// consumes them. The reference controller's catalog, pkg/controller/events,
// re-exports them as type aliases.
//
// # Concurrency properties
//
// All methods are safe for concurrent use and never block. The slot is an
// atomic pointer to an immutable entry, so Get and HasState are a single
// atomic load; Cache keeps whichever of concurrent calls took the later
// sequence.
package leadership
