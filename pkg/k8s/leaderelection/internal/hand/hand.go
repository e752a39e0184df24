// Package hand carries the hand operations of leaderelection.MemoryStore (overwrite,
// delete, restore, failed watches) to package leaderelectiontest, so that tests and
// demos can inject faults without those operations being part of the store's API.
// Being internal, only the two packages can import it: MemoryStore.Faults takes a
// Key, which only they can make, and returns the operations bound to that store.
package hand

// Key is the argument of leaderelection's MemoryStore.Faults. Its unexported field
// keeps any package that cannot import this one from making a value of it.
type Key struct{ key struct{} }

// Faults are the hand operations of one store, on its records of type R.
type Faults[R any] struct {
	// Set overwrites the record, whatever its version, and returns it as stored.
	Set func(r R) R
	// Delete removes the record, if present.
	Delete func()
	// Restore puts the store back to an earlier state at version.
	Restore func(version uint64, r R, exists bool)
	// FailWatches ends every open watch with an event carrying err.
	FailWatches func(err error)
}
