package deathsignal

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// leaseWrite is a state of the Lease as a watch in the test process saw it.
type leaseWrite struct {
	holder string
	seen   time.Time
}

// leaseLog records the states of one Lease from a watch, with the time the test saw
// each, so that a takeover can be judged against the writes before it rather than
// against a wall-clock sleep.
type leaseLog struct {
	// mu guards writes and changed.
	mu      sync.Mutex
	writes  []leaseWrite
	changed chan struct{} // closed and replaced on each new state
}

// watchLease starts a leaseLog of the Lease name (its current state first); it stops
// with the test.
func watchLease(t *testing.T, cs kubernetes.Interface, name string) *leaseLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cs.CoordinationV1().Leases(namespace).Watch(ctx,
		metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		cancel()
		t.Fatalf("watch Lease %s: %v", name, err)
	}
	l := &leaseLog{changed: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer w.Stop()
		last := ""
		for ev := range w.ResultChan() {
			lease, ok := ev.Object.(*coordinationv1.Lease)
			if !ok || ev.Type == watch.Deleted || lease.ResourceVersion == last {
				continue
			}
			last = lease.ResourceVersion
			holder := ""
			if lease.Spec.HolderIdentity != nil {
				holder = *lease.Spec.HolderIdentity
			}
			l.add(leaseWrite{holder: holder, seen: time.Now()})
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

func (l *leaseLog) add(w leaseWrite) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, w)
	close(l.changed)
	l.changed = make(chan struct{})
}

// snapshot returns the states seen so far, and a channel closed when a newer one comes.
func (l *leaseLog) snapshot() ([]leaseWrite, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.writes), l.changed
}

// awaitRenewsOrTakeover waits, at most timeout, until the test has seen n writes of
// holder after from, or a write of another holder after from; it returns the number
// of holder's writes it saw after from and whether another holder wrote.
func (l *leaseLog) awaitRenewsOrTakeover(t *testing.T, holder string, from time.Time, n int, timeout time.Duration) (renews int, taken bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		writes, changed := l.snapshot()
		renews, taken = 0, false
		for _, w := range writes {
			switch {
			case !w.seen.After(from):
			case w.holder == holder:
				renews++
			default:
				taken = true
			}
		}
		if renews >= n || taken {
			return renews, taken
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("Lease: neither %d writes of %s nor another holder within %v of %s; seen %d",
				n, holder, timeout, from.Format(time.StampMilli), renews)
		}
	}
}

// lastWriteOf is when the test last saw a write of holder before at; ok is false if it
// saw none.
func (l *leaseLog) lastWriteOf(holder string, at time.Time) (seen time.Time, ok bool) {
	writes, _ := l.snapshot()
	for _, w := range writes {
		if w.holder == holder && w.seen.Before(at) {
			seen, ok = w.seen, true
		}
	}
	return seen, ok
}

// checkLeaseRules fails the test unless started, the start of the follower's term,
// came at least LeaseDuration − RetryPeriod after the last write of holder (the
// previous leader) the test saw before it: no proof of holder's death was given, so
// only the lease rules may hand the lease on (LeaseDuration after the follower saw
// the last write; RetryPeriod is slack for the two watches' delivery times). A
// follower that took a non-proof for proof takes the lease within about a
// RetryPeriod of a live leader's last renew.
func checkLeaseRules(t *testing.T, l *leaseLog, holder string, started time.Time) {
	t.Helper()
	last, ok := l.lastWriteOf(holder, started)
	if !ok {
		t.Fatalf("no write of %s seen before the next term began", holder)
	}
	if d := started.Sub(last); d < leaseDuration-retryPeriod {
		t.Fatalf("next term %v after %s's last write seen, before the lease rules allow (%v)",
			d.Round(time.Millisecond), holder, leaseDuration-retryPeriod)
	}
	t.Logf("next term %v after %s's last write seen", started.Sub(last).Round(time.Millisecond), holder)
}
