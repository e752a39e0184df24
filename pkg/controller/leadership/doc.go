// Package leadership holds helpers for the controller's split between
// all-replica components (run on every replica) and leader-only components
// (run only on the elected leader), and the events that carry leadership over
// the bus (LeaderElectionStartedEvent, BecameLeaderEvent, LostLeadershipEvent,
// NewLeaderObservedEvent).
//
// # Usage
//
// A leader-only component subscribes after the all-replica side published the
// state it needs. StateReplayer[T] keeps the newest event of type T and publishes
// it again at the start of each term, so the new leader's components get current
// state at once:
//
//	configReplayer := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus)
//	configReplayer.Publish(validated)            // all-replica side: cache and publish
//	m.AddReplayer("config", configReplayer)      // lifecycle: Replay at each term's start
//
// State goes out through StateReplayer.Publish and nothing else: it caches the
// event, stamped with the bus's sequence, then publishes it, so a subscriber made
// at any moment and then replayed to ends holding the newest state, and a replay
// never reaches a subscriber after newer state (EventBus.Republish).
//
// With sharded leadership (pkg/k8s/sharding), ShardedReplayer[T] keeps one slot
// per shard: every replica records every shard's state (Publish) before it joins
// the ring, and a shard's work calls Watch under its shard term's context to get
// the shard's newest state at once, then each newer one.
//
// # Design notes
//
// Why replays, why Publish caches before it publishes, how replays are ordered and
// why ShardedReplayer keeps its own watchers are in docs/design/leadership.md in
// the repository.
//
// # Concurrency properties
//
// All methods are safe for concurrent use, through an internal RWMutex
// around the slot, and never block on anything but it and the short
// serialisation of concurrent Publish calls (EventBus.Publish itself never
// blocks). Of concurrent Cache calls, the slot keeps the one that took the
// later sequence.
package leadership
