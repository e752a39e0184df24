package leaderelection

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// LeaseRecord is the state of a lease: the fields of a coordination.k8s.io/v1 Lease that
// client-go's leader election reads and writes, plus the resourceVersion.
type LeaseRecord struct {
	// HolderIdentity is the identity of the leader; "" when the lease was released.
	HolderIdentity string
	// LeaseDuration is how long followers wait for a renew before taking the lease
	// (whole seconds on Kubernetes).
	LeaseDuration time.Duration
	// AcquireTime is when the holder acquired the lease (wall clock of the holder).
	AcquireTime time.Time
	// RenewTime is when the holder last renewed (wall clock of the holder, informational:
	// followers never compare it with their own clock).
	RenewTime time.Time
	// LeaseTransitions counts changes of holder; it restarts at 0 when the lease is
	// created.
	LeaseTransitions int32
	// ResourceVersion is set by the store on every write: a decimal number that grows
	// with every write of the lease, including deletes and re-creates. Update is a
	// compare-and-swap on it.
	ResourceVersion string
}

// sameSpec reports whether a and b agree in everything but the resourceVersion.
func sameSpec(a, b LeaseRecord) bool {
	return a.HolderIdentity == b.HolderIdentity &&
		a.LeaseDuration == b.LeaseDuration &&
		a.AcquireTime.Equal(b.AcquireTime) &&
		a.RenewTime.Equal(b.RenewTime) &&
		a.LeaseTransitions == b.LeaseTransitions
}

// zeroSpec reports whether r carries no lease state (at most a resourceVersion).
func zeroSpec(r LeaseRecord) bool { return sameSpec(r, LeaseRecord{}) }

// LeaseEvent is one observation of a watched lease.
type LeaseEvent struct {
	// Record is the lease's state. For a deletion it is the last state before the
	// delete when the store knows it (zero fields otherwise); its ResourceVersion is
	// that of the delete when known.
	Record LeaseRecord
	// Deleted reports that the lease does not exist.
	Deleted bool
}

// LeaseStore reads and writes one lease. Implementations are safe for concurrent use.
// Stores in this package: NewKubernetesStore and MemoryStore.
type LeaseStore interface {
	// Get returns the lease, or an error wrapping ErrLeaseNotFound when it is absent.
	Get(ctx context.Context) (LeaseRecord, error)
	// Create writes a new lease (r.ResourceVersion is ignored) and returns it as stored,
	// or an error wrapping ErrConflict when the lease exists.
	Create(ctx context.Context, r LeaseRecord) (LeaseRecord, error)
	// Update overwrites the lease if its resourceVersion is still r.ResourceVersion and
	// returns it as stored. It returns an error wrapping ErrConflict when the version is
	// stale (or empty), ErrLeaseNotFound when the lease was deleted.
	Update(ctx context.Context, r LeaseRecord) (LeaseRecord, error)
	// Watch delivers the lease's current state first (Deleted when absent), then its
	// changes in order; a store may skip intermediate states but always delivers the
	// latest. The store closes the channel when ctx ends or the watch breaks; the caller
	// then watches again, which re-reads the current state.
	Watch(ctx context.Context) (<-chan LeaseEvent, error)
	// String names the lease for logs: "namespace/name" or "memory/name".
	String() string
}

// parseVersion parses a resourceVersion as a decimal number.
func parseVersion(rv string) (uint64, bool) {
	v, err := strconv.ParseUint(rv, 10, 64)
	return v, err == nil && v > 0
}

// parseTerm turns the resourceVersion of an acquiring write into a term.
func parseTerm(rv string) (uint64, error) {
	v, ok := parseVersion(rv)
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrInvalidTerm, rv)
	}
	return v, nil
}
