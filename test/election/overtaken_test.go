package election

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAcquireAnsweredAfterTheLeaseMovedOn: the answer to a's acquiring create is held
// in a's transport while the Lease is deleted by hand and b, starting cold, creates it
// again and leads. When a reads its answer, its watch has shown the delete and b's
// Lease: a must not start a term on a write the API server has moved past (test/chaos
// found it on the real API server: a term begun on a late answer, beside the cold
// start's, until the watch events were read). The monitor proves no overlap; the test
// also checks that a started no term at all.
func TestAcquireAnsweredAfterTheLeaseMovedOn(t *testing.T) {
	h := newHarness(t, shared)
	lease := leaseName(t)
	// RenewDeadline well above the hold, so a's term would still be live when its
	// answer comes.
	tm := timings{lease: 15 * time.Second, renew: 10 * time.Second, retry: 2 * time.Second}
	applied, hold := make(chan struct{}), make(chan struct{})
	var once sync.Once
	log := &requestLog{onWrite: func(w leaseWrite) {
		if w.Method == http.MethodPost {
			once.Do(func() {
				close(applied)
				<-hold
			})
		}
	}}
	a := h.baton("overtaken-a", lease, candidateOptions{timings: tm, log: log})
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	defer release()
	select {
	case <-applied:
	case <-time.After(10 * time.Second):
		t.Fatal("overtaken-a's create was not answered within 10s")
	}
	leases := shared.Clientset().CoordinationV1().Leases(namespace)
	if err := leases.Delete(context.Background(), lease, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b := h.baton("overtaken-b", lease, candidateOptions{timings: tm})
	waitFor(t, 5*time.Second, "overtaken-b (cold) to lead", b.el.IsLeader)
	// Let a's watch receive the delete and b's create (milliseconds on a local API
	// server; the headroom is for a loaded machine).
	time.Sleep(2 * time.Second)
	release()
	waitFor(t, 5*time.Second, "overtaken-a to see overtaken-b lead", func() bool { return a.el.GetLeader() == b.who })
	time.Sleep(500 * time.Millisecond) // a term started on the answer would be recorded by now
	if terms := a.started(); len(terms) != 0 {
		t.Errorf("overtaken-a started term %d on an answer its watch had contradicted (overtaken-b leads)", terms[0].term)
	}
	if !b.el.IsLeader() {
		t.Error("overtaken-b no longer leads")
	}
}
