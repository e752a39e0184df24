package crbench

import (
	"context"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// leaseWatch records when this process saw each change of a Lease's holder: the one
// clock of every implementation's election, whatever its callbacks.
type leaseWatch struct {
	stop context.CancelFunc
	done chan struct{}

	// mu guards changes.
	mu      sync.Mutex
	changes []holderChange
}

type holderChange struct {
	holder string
	at     time.Time
}

func watchLease(b *testing.B, name string) *leaseWatch {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := shared.Clientset().CoordinationV1().Leases("default").Watch(ctx,
		metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	lw := &leaseWatch{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(lw.done)
		defer w.Stop()
		last := ""
		for ev := range w.ResultChan() {
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == last {
				continue
			}
			last = *l.Spec.HolderIdentity
			lw.mu.Lock()
			lw.changes = append(lw.changes, holderChange{holder: last, at: time.Now()})
			lw.mu.Unlock()
		}
	}()
	b.Cleanup(lw.close)
	return lw
}

func (lw *leaseWatch) close() {
	lw.stop()
	<-lw.done
}

// takenAfter returns when a holder other than the one of t (and not "") was first
// seen after t.
func (lw *leaseWatch) takenAfter(t time.Time) (time.Time, bool) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	before := ""
	for _, c := range lw.changes {
		if !c.at.After(t) {
			before = c.holder
			continue
		}
		if c.holder != "" && c.holder != before {
			return c.at, true
		}
	}
	return time.Time{}, false
}
