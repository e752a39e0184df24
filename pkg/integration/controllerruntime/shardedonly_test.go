package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// TestRuntimeWithoutLeaderElectionIDRefusesLeaderOnlyWork: a Runtime built without
// LeaderElectionID refuses every kind of leader-only work with an error naming the
// field; it takes ServerSideFence and DeathSignal, which the sharded controllers use.
func TestRuntimeWithoutLeaderElectionIDRefusesLeaderOnlyWork(t *testing.T) {
	mgr, err := manager.New(shared.Config(), manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	// ServerSideFence stamps the shard Leases' tokens of sharded controllers.
	fencedMgr, err := manager.New(shared.Config(), manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(fencedMgr, Options{ServerSideFence: true, Identity: "no-id-fenced", MetricsRegisterer: prometheus.NewRegistry()}); err != nil {
		t.Errorf("New with ServerSideFence but no LeaderElectionID: %v", err)
	}
	rt, err := New(mgr, Options{Identity: "no-id", MetricsRegisterer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatalf("New without LeaderElectionID and LeaderElectionNamespace: %v", err)
	}
	rec := &recorder{}
	for what, err := range map[string]error{
		"AddController": rt.AddController(Controller{Name: "c", Reconciler: rec, Watches: []Watch{{Object: &corev1.ConfigMap{}}}}),
		"AddLeaderOnly": rt.AddLeaderOnly("f", func(context.Context) error { return nil }),
		"AddReplayer":   rt.AddReplayer("r", leadership.NewStateReplayer[*stateEvent](rt.Bus())),
	} {
		if !errors.Is(err, ErrInvalidRegistration) || !strings.Contains(err.Error(), "LeaderElectionID") {
			t.Errorf("%s without LeaderElectionID: %v, want ErrInvalidRegistration naming LeaderElectionID", what, err)
		}
	}
	// The refused names are not taken: the same name registers a sharded controller.
	if _, err := rt.AddShardedController(ShardedController{Name: "c", Reconciler: rec, For: &corev1.ConfigMap{},
		Sharding: sharding.Config{Namespace: "default"}}); err != nil {
		t.Errorf("AddShardedController after the refusals: %v", err)
	}
	if rt.IsLeader() || rt.Term() != 0 || rt.GetLeader() != "" || rt.Status().Running {
		t.Errorf("a Runtime without election: leader %v, term %d, holder %q, status %+v", rt.IsLeader(), rt.Term(), rt.GetLeader(), rt.Status())
	}
}

// TestShardedControllersWithoutLeaderElectionID runs two replicas of a sharded
// controller on Runtimes without LeaderElectionID on the real API server: every
// object is reconciled and written through the fenced client, stamped with its
// shard's term; the probes pass and the metrics are served; and no Lease is held by
// either replica but the ring's own.
func TestShardedControllersWithoutLeaderElectionID(t *testing.T) {
	const (
		objects = 20
		shards  = 4
	)
	ctx := context.Background()
	direct, err := client.New(shared.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sharded-only-"}}
	if err := direct.Create(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	ns := namespace.Name
	for i := range objects {
		if err := direct.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("cm-", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	ring, _ := sharding.NewRing(shards)
	ledger := newShardLedger(ring, ns)
	nodes := make([]*node, 2)
	for i := range nodes {
		id := fmt.Sprint("solo-", i)
		n := newNode(t, id, "") // LeaderElectionNamespace is set, and unused
		_, err := n.rt.AddShardedController(ShardedController{
			Name:       "solo",
			Reconciler: &shardWriter{replica: id, ledger: ledger, reader: n.mgr.GetCache(), writer: n.rt.FencedClient(nil)},
			For:        &corev1.ConfigMap{},
			Sharding: sharding.Config{
				Namespace: ns, Shards: shards,
				LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry,
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = n
		n.start(t)
	}
	batontest.WaitFor(t, 30*time.Second, "every ConfigMap written by a replica, stamped with a term", func() bool {
		var list corev1.ConfigMapList
		if err := direct.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, cm := range list.Items {
			if !strings.HasPrefix(cm.Data["owner"], "solo-") || cm.Annotations[TermAnnotation] == "" {
				return false
			}
		}
		return len(list.Items) == objects
	})
	for _, n := range nodes {
		if err := n.rt.healthz(nil); err != nil {
			t.Errorf("healthz: %v", err)
		}
		if err := n.rt.readyz(nil); err != nil {
			t.Errorf("readyz: %v", err)
		}
		if n.rt.IsLeader() || n.rt.Term() != 0 {
			t.Errorf("%s: leader %v in term %d without an election", n.rt.Identity(), n.rt.IsLeader(), n.rt.Term())
		}
		families, err := n.registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range families {
			names = append(names, f.GetName())
		}
		if !strings.Contains(strings.Join(names, " "), "baton_fenced_writes_refused_total") {
			t.Errorf("%s's metrics: %v, want baton_fenced_writes_refused_total among them", n.rt.Identity(), names)
		}
	}
	// The only Leases the replicas hold are the ring's: its shards' and their members'.
	// (Looked for in the ring's namespace and in LeaderElectionNamespace, where a
	// single-leader Lease would be: other namespaces hold earlier runs' rings.)
	// A shard handed over when the second replica joined has no holder for a moment:
	// wait until every shard is held again.
	var leases []coordinationv1.Lease
	held := func() int {
		leases = nil
		for _, in := range []string{ns, "default"} {
			list, err := shared.Clientset().CoordinationV1().Leases(in).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, list.Items...)
		}
		n := 0
		for _, l := range leases {
			if strings.HasPrefix(ptr.Deref(l.Spec.HolderIdentity, ""), "solo-") {
				n++
			}
		}
		return n
	}
	batontest.WaitFor(t, 10*time.Second, fmt.Sprintf("the replicas to hold the ring's %d shards and %d members", shards, len(nodes)),
		func() bool { return held() == shards+len(nodes) })
	for _, l := range leases {
		holder := ptr.Deref(l.Spec.HolderIdentity, "")
		if !strings.HasPrefix(holder, "solo-") {
			continue
		}
		if l.Namespace != ns || !strings.HasPrefix(l.Name, "solo-shard-") && l.Name != sharding.MemberLeaseName("solo", holder) {
			t.Errorf("Lease %s/%s held by %s: a Runtime without LeaderElectionID holds only its rings' Leases", l.Namespace, l.Name, holder)
		}
	}
	ledger.check(t)
}
