package controllerruntime

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"

	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/termctx"
)

// regardingRecorder keeps the UID of each Event's regarding Lease.
type regardingRecorder struct {
	mu   sync.Mutex
	uids []types.UID
}

func (r *regardingRecorder) Eventf(regarding, _ runtime.Object, _, _, _, _ string, _ ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.uids = append(r.uids, regarding.(*coordinationv1.Lease).UID)
}

// TestEventLeaseUIDFromTheTerm: an Event of a term whose acquisition found the
// Lease's UID (termctx.Term.LeaseUID) regards the Lease by that UID with no read of
// the Lease (before, each replica read every shard Lease it took once, 124 reads in
// BenchmarkShardMoves' rolling restart); a term that carries none reads it once.
func TestEventLeaseUIDFromTheTerm(t *testing.T) {
	cs := fake.NewClientset(&coordinationv1.Lease{})
	var gets atomic.Int64
	cs.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets.Add(1)
		return true, &coordinationv1.Lease{}, nil
	})
	rec := &regardingRecorder{}
	e := &leaseEvents{
		recorder: func() events.EventRecorder { return rec }, cs: cs, namespace: "ns", name: "ring-shard-1",
		stats: func() k8sle.Stats { return k8sle.Stats{} }, stopping: func() bool { return false },
		reasons: shardReasons, what: "owner of shard 1",
	}
	for _, uid := range []string{"uid-1", "uid-2"} { // a Lease deleted and created again: the new one's
		e.started(termctx.With(context.Background(), termctx.Term{Number: 7, LeaseUID: uid}))
		e.wg.Wait()
		rec.mu.Lock()
		got := rec.uids[len(rec.uids)-1]
		rec.mu.Unlock()
		if got != types.UID(uid) || gets.Load() != 0 {
			t.Errorf("the Event of a term whose Lease UID is %s regards UID %q after %d Lease reads, want it and no read", uid, got, gets.Load())
		}
	}
	e.uid = ""
	e.started(termctx.With(context.Background(), termctx.Term{Number: 8}))
	e.wg.Wait()
	if gets.Load() != 1 {
		t.Errorf("%d Lease reads for the Event of a term with no Lease UID, want 1", gets.Load())
	}
}
