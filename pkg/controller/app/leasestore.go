package app

import (
	"context"
	"strconv"
	"sync"

	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// leaseObserver is a LeaseStore that passes every call through and watches
// what goes by, to tell when a write of this replica acquired the lease and
// from whom: the last record seen before it is the previous holder's.
type leaseObserver struct {
	inner      k8sle.LeaseStore
	identity   string
	onTakeover func(prev, acquired k8sle.LeaseRecord)

	// mu guards last and known.
	mu    sync.Mutex
	last  k8sle.LeaseRecord // newest record seen (a deleted lease's last state)
	known bool
}

var _ k8sle.LeaseStore = (*leaseObserver)(nil)

func (o *leaseObserver) String() string { return o.inner.String() }

func (o *leaseObserver) Get(ctx context.Context) (k8sle.LeaseRecord, error) {
	r, err := o.inner.Get(ctx)
	if err == nil {
		o.see(r)
	}
	return r, err
}

func (o *leaseObserver) Create(ctx context.Context, r k8sle.LeaseRecord) (k8sle.LeaseRecord, error) {
	prev, known := o.snapshot()
	out, err := o.inner.Create(ctx, r)
	if err == nil {
		o.wrote(prev, known, out)
	}
	return out, err
}

func (o *leaseObserver) Update(ctx context.Context, r k8sle.LeaseRecord) (k8sle.LeaseRecord, error) {
	prev, known := o.snapshot()
	out, err := o.inner.Update(ctx, r)
	if err == nil {
		o.wrote(prev, known, out)
	}
	return out, err
}

// Watch passes the inner watch's events on through a goroutine of its own,
// noting each. The goroutine closes the returned channel once the inner
// one is closed (when ctx ends or the watch breaks); while ctx is done it
// stops passing events on and only drains.
func (o *leaseObserver) Watch(ctx context.Context) (<-chan k8sle.LeaseEvent, error) {
	in, err := o.inner.Watch(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan k8sle.LeaseEvent, 1)
	go func() {
		defer close(out)
		for ev := range in {
			if !ev.Deleted || ev.Record.HolderIdentity != "" {
				o.see(ev.Record)
			}
			select {
			case out <- ev:
			case <-ctx.Done():
			}
		}
	}()
	return out, nil
}

// see records r as the newest state unless it is older than what was seen.
func (o *leaseObserver) see(r k8sle.LeaseRecord) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.known && olderVersion(r.ResourceVersion, o.last.ResourceVersion) {
		return
	}
	o.last, o.known = r, true
}

func (o *leaseObserver) snapshot() (k8sle.LeaseRecord, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last, o.known
}

// wrote records a successful write and reports it as a takeover when it
// made this replica the holder with a new acquire time (a renew keeps the
// acquire time, a release clears the holder). prev is what was seen before
// the write was sent: the watch may report the write itself before the
// write's call returns.
func (o *leaseObserver) wrote(prev k8sle.LeaseRecord, known bool, out k8sle.LeaseRecord) {
	o.see(out)
	if o.onTakeover == nil || out.HolderIdentity != o.identity || !known {
		return
	}
	if prev.HolderIdentity == o.identity && prev.AcquireTime.Equal(out.AcquireTime) {
		return // a renew
	}
	o.onTakeover(prev, out)
}

// olderVersion reports whether resourceVersion a is a smaller number than b;
// versions that do not parse as numbers are never older.
func olderVersion(a, b string) bool {
	va, okA := parseDecimal(a)
	vb, okB := parseDecimal(b)
	return okA && okB && va < vb
}

func parseDecimal(s string) (uint64, bool) {
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}
