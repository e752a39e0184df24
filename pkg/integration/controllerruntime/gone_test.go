package controllerruntime

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// TestShardedDeleteAndRecreateLeavesNoGoneEntry pins a finding of issue 25's review
// ("gone entries may leak"): a ConfigMap deleted and created again under its name
// while its reconcile is held (one worker, busy) is reconciled once, as the new
// object; the shard recorded at the old one's delete event must go then, not stay
// for good.
func TestShardedDeleteAndRecreateLeavesNoGoneEntry(t *testing.T) {
	n := newNode(t, "gone", "gone-single")
	held := &holdingReconciler{release: make(chan struct{}), first: make(chan struct{})}
	h, err := n.rt.AddShardedController(ShardedController{
		Name: "gone", Reconciler: held, For: &corev1.ConfigMap{},
		Options: controller.Options{MaxConcurrentReconciles: 1},
		Sharding: sharding.Config{Namespace: "default", Shards: 4,
			LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry},
	})
	if err != nil {
		t.Fatal(err)
	}
	n.start(t)
	batontest.WaitFor(t, 30*time.Second, "all 4 shards led", func() bool { return len(h.Sharder().Owned()) == 4 })
	direct, err := client.New(shared.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	blocker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gone-blocker"}}
	if err := direct.Create(ctx, blocker); err != nil {
		t.Fatal(err)
	}
	defer direct.Delete(ctx, blocker)
	<-held.first // the one worker is busy with the blocker
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gone-cm"}}
	if err := direct.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	defer direct.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gone-cm"}})
	if err := direct.Delete(ctx, cm, &client.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(cm.UID)}}); err != nil {
		t.Fatal(err)
	}
	batontest.WaitFor(t, 10*time.Second, "the delete event recorded", func() bool { return h.goneEntries() == 1 })
	again := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gone-cm"}}
	if err := direct.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	batontest.WaitFor(t, 10*time.Second, "the new object in the cache", func() bool {
		got := &corev1.ConfigMap{}
		return n.mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(again), got) == nil && got.UID == again.UID
	})
	close(held.release)
	batontest.WaitFor(t, 10*time.Second, "gone-cm reconciled", func() bool { return held.saw("gone-cm") })
	time.Sleep(500 * time.Millisecond) // any later reconcile of it
	if got := h.goneEntries(); got != 0 {
		t.Errorf("%d gone entries after the name was reconciled as the new object, want 0", got)
	}
}

// goneEntries returns how many deleted objects' shards are recorded.
func (s *Sharded) goneEntries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.gone)
}

// holdingReconciler holds its first reconcile until release is closed.
type holdingReconciler struct {
	release, first chan struct{}
	once           sync.Once
	mu             sync.Mutex
	names          []string
}

func (r *holdingReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.once.Do(func() {
		close(r.first)
		select {
		case <-r.release:
		case <-ctx.Done():
		}
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names = append(r.names, req.Name)
	return reconcile.Result{}, nil
}

func (r *holdingReconciler) saw(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.names {
		if n == name {
			return true
		}
	}
	return false
}
