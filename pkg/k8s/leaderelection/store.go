package leaderelection

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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
	// Strategy is the lease's spec.strategy (coordinated leader election, KEP-4355).
	// The elector keeps it as it found it.
	Strategy string
	// PreferredHolder is the lease's spec.preferredHolder (KEP-4355): the candidate the
	// holder should hand the lease to. A leader that sees another candidate named here
	// ends its term and releases the lease, keeping the field, so that candidate takes
	// it at once (see Elector.HandOver). An acquisition clears it.
	PreferredHolder string
	// Marker is Baton's note of its own protocol, kept on Kubernetes in the annotation
	// leaderelection.baton.dev/marker: "holder:<identity>" on a Baton acquire or renew,
	// "release:<leaseTransitions>:<identity>" on a Baton release,
	// "handoff:<cite>:<identity>" on a one-write hand-over to identity (HandOffs), so
	// candidates can tell
	// a Baton leader's lease and a Baton release from the writes of other electors or
	// people, who keep annotations as they find them. "" when never set.
	Marker string
	// Incarnation is the holder's Config.Incarnation bound to the write that carried
	// it, "<acquireTime> <renewTime> <incarnation>" (times in RFC 3339 in UTC), kept on
	// Kubernetes in the annotation leaderelection.baton.dev/incarnation; "" when none
	// was recorded. A Baton release clears it. Other writers (client-go, Baton
	// versions before it) keep it as they find it, but every acquisition writes a new
	// acquireTime and every renew a new renewTime (client-go keeps the acquireTime when
	// the holder already has its identity, e.g. a restarted container of the same
	// pod), so it counts only for a Baton holder (heldByBaton) whose acquireTime and
	// renewTime it names: the record is then that incarnation's own write.
	Incarnation string
	// ResourceVersion is set by the store on every write: a decimal number that grows
	// with every write of the lease, including deletes and re-creates. Update is a
	// compare-and-swap on it.
	ResourceVersion string
	// UID is the lease object's own identity (metadata.uid on Kubernetes), set by
	// the store on reads and writes; "" for a store without one (MemoryStore). A
	// lease deleted and created again has a new UID. The elector never writes it
	// and compares records without it; it hands it to the term (termctx.Term.LeaseUID).
	UID string
}

// sameCore reports whether a and b agree in the fields of client-go's protocol: the
// holder, the duration, both times and the transitions. A record of the same core as
// one this elector wrote is that write (the times are unique), whatever else changed.
func sameCore(a, b LeaseRecord) bool {
	return a.HolderIdentity == b.HolderIdentity &&
		a.LeaseDuration == b.LeaseDuration &&
		a.AcquireTime.Equal(b.AcquireTime) &&
		a.RenewTime.Equal(b.RenewTime) &&
		a.LeaseTransitions == b.LeaseTransitions
}

// sameSpec reports whether a and b agree in everything but the resourceVersion.
func sameSpec(a, b LeaseRecord) bool {
	return sameCore(a, b) && a.Strategy == b.Strategy && a.PreferredHolder == b.PreferredHolder &&
		a.Marker == b.Marker && a.Incarnation == b.Incarnation
}

// zeroSpec reports whether r carries no lease state (at most a resourceVersion).
func zeroSpec(r LeaseRecord) bool { return sameSpec(r, LeaseRecord{}) }

// holderMarker is the Marker of a Baton acquire or renew by identity.
func holderMarker(identity string) string { return holderMarkerPrefix + identity }

// holderMarkerPrefix starts every holder marker.
const holderMarkerPrefix = "holder:"

// handOffMarker is the Marker of a one-write hand-over (HandOffs) to identity,
// citing cite, the version of identity's liveness record that the writer saw last.
func handOffMarker(identity, cite string) string {
	return handOffMarkerPrefix + cite + ":" + identity
}

// handOffMarkerPrefix starts every hand-off marker.
const handOffMarkerPrefix = "handoff:"

// handedOff returns the cite of r when r is a one-write hand-over as written: a
// hand-off marker naming r's holder.
func handedOff(r LeaseRecord) (cite string, ok bool) {
	rest, ok := strings.CutPrefix(r.Marker, handOffMarkerPrefix)
	if !ok {
		return "", false
	}
	cite, identity, ok := strings.Cut(rest, ":")
	return cite, ok && cite != "" && identity != "" && identity == r.HolderIdentity
}

// releaseMarker is the Marker of a Baton release by identity of a lease with the given
// transitions.
func releaseMarker(transitions int32, identity string) string {
	return "release:" + strconv.FormatInt(int64(transitions), 10) + ":" + identity
}

// heldByBaton reports whether r's holder is a Baton elector: its marker is the holder
// marker of that holder, which other writers keep but cannot have made for their own
// holder, or a hand-off marker naming it (a Baton holder wrote it in). It compares
// without building the marker (it runs on every observed state).
func heldByBaton(r LeaseRecord) bool {
	if identity, ok := strings.CutPrefix(r.Marker, holderMarkerPrefix); ok {
		return r.HolderIdentity != "" && identity == r.HolderIdentity
	}
	_, ok := handedOff(r)
	return ok
}

// releasedByBaton reports whether r is a Baton release as written: holder cleared, the
// release marker naming the transitions r still has. Another writer clearing a Baton
// holder keeps its holder marker; a clear of a lease that another elector acquired
// after a Baton release has more transitions than the stale marker names.
func releasedByBaton(r LeaseRecord) bool {
	if r.HolderIdentity != "" {
		return false
	}
	rest, ok := strings.CutPrefix(r.Marker, "release:")
	if !ok {
		return false
	}
	n, identity, ok := strings.Cut(rest, ":")
	return ok && identity != "" && n == strconv.FormatInt(int64(r.LeaseTransitions), 10)
}

// LeaseEvent is one observation of a watched lease.
type LeaseEvent struct {
	// Record is the lease's state. For a deletion it is the last state before the
	// delete when the store knows it (zero fields otherwise); its ResourceVersion is
	// that of the delete when known.
	Record LeaseRecord
	// Deleted reports that the lease does not exist.
	Deleted bool
	// Gap, when set, says that the store may have skipped states of the lease between
	// the watch's previous event and this one (a MemoryStore whose reader is slow). A
	// store that skips states must set it on the first event it delivers after them:
	// the elector then does not take the watch as having shown every state (see
	// docs/design/leaderelection.md, # Slow acquiring writes). It means nothing on a watch's first event.
	Gap bool
	// Err, when set, is a watch error the store reports (e.g. 410 Gone: the version is
	// too old): the event carries no state, and the store closes the channel after it.
	// The elector logs and counts it and watches again, which re-lists.
	Err error
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
	// changes in order; a store may skip intermediate states, but must then set Gap on
	// the first event after them, and always delivers the latest. The store closes the channel when ctx ends or the watch breaks, after an
	// event with Err set if it knows why; the caller then watches again, which re-reads
	// the current state. The first event is authoritative: a resourceVersion below one
	// seen before means the store's history went back (an etcd restore).
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
