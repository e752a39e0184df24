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
// component handed out, and re-publishes it on request (on BecameLeaderEvent,
// through the runtime's term hooks) so the new leader's components get
// current state at once:
//
//	configReplayer := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus)
//	configReplayer.Publish(validated) // all-replica side: cache and publish, one step
//	...
//	configReplayer.Replay()           // at the start of a term
//
// The cache is a single slot: a new leader needs the current state, not a
// history. Render and validation events are not replayed: the leader renders
// afresh on BecameLeaderEvent (see pkg/controller/reconciler).
//
// # The rule
//
// State goes out through StateReplayer.Publish and nothing else: it caches
// the event (stamped with the bus's sequence) and then publishes it, with
// concurrent calls serialised. With this one step, a subscriber made at any
// moment and then replayed to ends holding the newest state: subscribed
// before the cache, it gets the publish; between cache and publish, it gets
// the replay and the publish (the same state twice, which a state consumer
// takes as a no-op); after the publish, it gets the replay. Publishing
// first and caching second is wrong: a subscriber made between the two and
// replayed to before the cache gets the previous state and nothing after it,
// and stays one version behind until the next change. Cache and Get remain
// for what is not handed out on the bus (seeding a replayer, reading the
// current state); Cache followed by EventBus.Publish from one goroutine is
// what Publish does, without the serialisation.
//
// # Ordering of replays
//
// Each cached event is stamped with the bus's sequence
// (EventBus.NextSequence), and Replay goes through EventBus.Republish, which
// skips every subscriber that already received an event of type T stamped at
// or after it. So a replay racing a newer publish never reaches a subscriber
// after that newer event, and a subscriber that existed when Replay was
// called ends up holding state at least as new as the state cached at that
// moment.
//
// # ShardedReplayer
//
// With sharded leadership (pkg/k8s/sharding) every replica leads some shards, each
// with a term of its own, and the leader-only work is per shard. ShardedReplayer[T]
// keeps one slot per shard: every replica records every shard's newest state
// (Publish), whether it leads the shard or not, and the work of a shard it comes to
// lead calls Watch under the shard term's context, which holds the shard's newest
// state at once and then each newer one, never an older one after a newer one. It
// keeps its own watchers instead of going through the bus, which routes by type and
// would hand every shard's work the states of all shards. A replica records every
// shard's state before it joins the ring (its all-replica side reads its synced
// cache first), so a shard moving to it finds the state there. The type's doc states
// the contract (# Ordering, # Shard loss).
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
// All methods are safe for concurrent use, through an internal RWMutex
// around the slot, and never block on anything but it and the short
// serialisation of concurrent Publish calls (EventBus.Publish itself never
// blocks). Of concurrent Cache calls, the slot keeps the one that took the
// later sequence.
package leadership
