// Package store keeps the object the leader publishes: one named object
// holding string data, labels and annotations, written with compare-and-swap
// on its resourceVersion so that two writers can never both win from the
// same read.
//
// # Implementations
//
// Memory keeps the object in process, for embedded mode, demos and tests.
// ConfigMap keeps it in a Kubernetes ConfigMap through the typed client-go
// client, where the API server enforces the resourceVersion check. Both
// implement Store with the same semantics; one contract test runs against
// both (the ConfigMap one against a real API server).
//
// # Semantics
//
// Get returns the stored object or ErrNotFound. Create stores a new object
// and fails with ErrConflict when one exists. Update replaces the object
// only if the resourceVersion given is the stored one, and fails with
// ErrConflict otherwise (ErrNotFound when it was deleted); an Update without
// a resourceVersion is refused with ErrNoResourceVersion rather than
// silently made unconditional. Every successful write returns the stored
// object with its new resourceVersion. The store sets Object.Name; the name
// of an object passed in is ignored.
//
// The usual write is a read-modify-write loop: Get, change a copy of each
// map that changes (see Sharing), Update with the resourceVersion read, and
// on ErrConflict read again.
//
// # Sharing: objects are read-only values
//
// An Object's maps are shared, not copied: the maps of an object a store
// returns (Get, Create, Update, Set) may be the very maps the store keeps
// and hands to every other caller, and the maps of an object passed to a
// write (Create, Update, Set) are handed over to the store, which may keep
// them as they are. So nobody modifies a map of an Object once it was
// passed to or returned by a store: a caller that wants to change one makes
// its own copy first (Object.Clone, or maps.Clone of the one map it
// changes) and passes the copy to the next write. A map that does not
// change is passed on as it is, which is what makes a write that changes
// one annotation cost one map, not three.
//
// Memory shares: its Get copies nothing and its writes keep the maps given.
// ConfigMap copies nothing either: it sends the maps given and returns those
// of the object the API server sent back, keeping a deep copy of its own
// for the next Update. The rule holds for the callers of both.
//
// # Testing
//
// Built with the race detector (go test -race), Memory checks the rule: it
// keeps a checksum of the maps of the object it stores and, at each call,
// panics (naming the store) if one of them was changed since it was
// stored. Together with the race detector, which reports a caller writing a
// shared map while another reads it, the tests of every package using
// Memory prove that nobody modifies a shared map.
//
// # Concurrency properties
//
// Both implementations are safe for concurrent use. A read-only Object may
// be read by any number of goroutines at once (see Sharing).
//
// The package hands out no channels.
package store
