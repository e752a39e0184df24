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
// The usual write is a read-modify-write loop: Get, change, Update with the
// resourceVersion read, and on ErrConflict read again.
//
// # Concurrency properties
//
// Both implementations are safe for concurrent use. Nothing passed in or
// returned aliases what a store keeps: callers may modify it freely. A
// write may return the very object it was given, with Name and
// ResourceVersion set (Memory does, to copy nothing for the caller), so the
// result of Create, Update or Set may share its maps with the argument.
//
// The package hands out no channels.
package store
