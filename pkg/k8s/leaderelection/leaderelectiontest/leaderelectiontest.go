// Package leaderelectiontest injects faults into a leaderelection.MemoryStore, for tests
// and demos: a write by hand, a delete by hand, an etcd restore, and watches ended with
// an error. Each acts on the store at once and is seen by its watchers as the
// Kubernetes API server's would be.
package leaderelectiontest

import (
	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/leaderelection/internal/hand"
)

func handOf(s *leaderelection.MemoryStore) hand.Faults[leaderelection.LeaseRecord] {
	return s.Faults(hand.Key{})
}

// Set overwrites the lease of s by hand, creating it when absent, whatever its
// resourceVersion, and returns it with its new resourceVersion.
func Set(s *leaderelection.MemoryStore, r leaderelection.LeaseRecord) leaderelection.LeaseRecord {
	return handOf(s).Set(r)
}

// Delete removes the lease of s by hand, if present. Watchers get a Deleted event
// carrying the last state and the resourceVersion of the delete.
func Delete(s *leaderelection.MemoryStore) { handOf(s).Delete() }

// Restore puts s back to an earlier state, as an etcd restore from a backup does: the
// lease becomes r (absent when exists is false) at resourceVersion version, versions
// go on from there, and every watch gets an event whose Err wraps
// leaderelection.ErrHistoryRestored and is closed (the API server restarts). version
// may be below versions already handed out.
func Restore(s *leaderelection.MemoryStore, version uint64, r leaderelection.LeaseRecord, exists bool) {
	handOf(s).Restore(version, r, exists)
}

// FailWatches ends every open watch of s with an event carrying err (e.g. a 410 Gone),
// then closes it, as an API server ending its watches does.
func FailWatches(s *leaderelection.MemoryStore, err error) { handOf(s).FailWatches(err) }
