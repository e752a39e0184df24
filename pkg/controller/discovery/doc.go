// Package discovery is the all-replica Discovery: it watches the target
// pods and publishes their full current set as
// events.HAProxyPodsDiscoveredEvent, caching the last one for a new leader.
//
// # Modes
//
// NewCluster watches the pods matching a label selector in one namespace
// with a client-go informer; a pod's Ready is its Ready condition, false
// once it is terminating or has no IP, and pods in a terminal phase are
// left out. NewSimulated keeps a simulated set instead, changed with
// SetPod, SetPods and RemovePod, for embedded mode, demos and tests.
//
// # Events
//
// Each event carries the whole set, sorted by namespace and name, and a
// Generation that every replica agrees on and that only increases, across
// replicas and terms: in cluster mode the resourceVersion of the pod list
// the informer had reached when the set was read (read before the set, so a
// set that changed always comes with a greater one); in simulated mode the
// version given with SetPodsAt (a shared pod set's counter), or one up from
// the last for the local setters. Should the source's version not advance
// with a change, the generation is the last one plus one, so that it never
// repeats or goes back on the replica. A change that leaves the set as it was publishes
// nothing; changes made while the previous one is being published coalesce
// into one event carrying the newest set. In cluster mode nothing is
// published before the informer has synced, so the first event is the full
// listed set, never a partial one.
//
// # Concurrency properties
//
// Start owns the goroutines it starts (the informer's, in cluster mode) and
// waits for them before it returns. Every event is computed and published on
// Start's goroutine, one at a time. SetPod, SetPods, RemovePod, Synced,
// Current and the replayer are safe for concurrent use at any time; the
// simulated setters never block and may be called before Start.
//
// The package hands out no channels and subscribes to nothing on the bus.
package discovery
