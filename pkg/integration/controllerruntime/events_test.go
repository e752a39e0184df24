package controllerruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// leaseEventReasons returns the reasons of the Events on the Lease name in default
// recorded by the Runtime.
func leaseEventReasons(t *testing.T, c client.Client, name string) []string {
	t.Helper()
	var reasons []string
	for _, e := range leaseEventsOn(t, c, name) {
		reasons = append(reasons, e.Reason)
	}
	return reasons
}

// leaseEventsOn returns the Events on the Lease name in default recorded by the
// Runtime.
func leaseEventsOn(t *testing.T, c client.Client, name string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := c.List(context.Background(), &list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "Lease" && e.Regarding.Name == name && e.ReportingController == eventRecorderName {
			out = append(out, e)
		}
	}
	return out
}

// TestLeaseEvents: a replica that leads records LeaderElected on its Lease through
// the manager's recorder, and LeaderReleased when it stops gracefully.
func TestLeaseEvents(t *testing.T) {
	direct, err := client.New(shared.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := newNode(t, "events", "lease-events")
	if err := NewControllerManagedBy(n.rt.Manager()).For(&corev1.ConfigMap{}).Complete(newRequestLog("e")); err != nil {
		t.Fatal(err)
	}
	n.start(t)
	batontest.WaitFor(t, 20*time.Second, "leading", n.rt.IsLeader)
	has := func(reason string) func() bool {
		return func() bool {
			for _, r := range leaseEventReasons(t, direct, "lease-events") {
				if r == reason {
					return true
				}
			}
			return false
		}
	}
	batontest.WaitFor(t, 20*time.Second, "a "+EventAcquired+" Event on the Lease", has(EventAcquired))
	n.stop(t)
	deadline := time.Now().Add(20 * time.Second)
	for !has(EventReleased)() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s Event on the Lease; its Events: %v", EventReleased, leaseEventReasons(t, direct, "lease-events"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLeaseNamespaceFromServiceAccount: without LeaderElectionNamespace, New takes
// the pod's namespace from the service account's file, as the manager does, and
// outside a pod (no file) refuses naming the field.
func TestLeaseNamespaceFromServiceAccount(t *testing.T) {
	mgr, err := manager.New(shared.Config(), manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(shared.Config())
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "namespace")
	old := serviceAccountNamespace
	serviceAccountNamespace = file
	defer func() { serviceAccountNamespace = old }()
	opts := Options{LeaderElectionID: "sa-namespace", Identity: "sa", Clientset: cs, MetricsRegisterer: prometheus.NewRegistry()}
	if _, err := New(mgr, opts); err == nil || !strings.Contains(err.Error(), "LeaderElectionNamespace") {
		t.Errorf("outside a pod: %v, want an error naming LeaderElectionNamespace", err)
	}
	if err := os.WriteFile(file, []byte("kube-system\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts.MetricsRegisterer = prometheus.NewRegistry()
	rt, err := New(mgr, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rt.lease.namespace != "kube-system" {
		t.Errorf("Lease namespace %q, want the service account's kube-system", rt.lease.namespace)
	}
}

// TestShardLeaseEvents: a sharded controller records on each shard Lease why it
// changed hands here: ShardAcquired when a replica takes a shard, ShardHandedOver
// when the first replica hands half its shards to a second that joined, and
// ShardHandedOver (or ShardReleased) again when that second stops gracefully.
func TestShardLeaseEvents(t *testing.T) {
	const shards = 4
	direct, err := client.New(shared.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nodes, handles := make([]*node, 2), make([]*Sharded, 2)
	for i := range nodes {
		nodes[i] = newNode(t, fmt.Sprint("shard-events-", i), "")
		handles[i], err = nodes[i].rt.AddShardedController(ShardedController{
			Name: "evented", Reconciler: &recorder{}, For: &corev1.ConfigMap{},
			Sharding: sharding.Config{Namespace: "default", Shards: shards,
				LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// leases returns how many shard Leases have an Event of reason.
	leases := func(reason string) func() bool {
		return func() bool { return countLeasesWith(t, direct, "evented", shards, reason) >= shards/2 }
	}
	nodes[0].start(t)
	batontest.WaitFor(t, 30*time.Second, "the first replica leading every shard", func() bool {
		return len(handles[0].Sharder().Owned()) == shards
	})
	batontest.WaitFor(t, 20*time.Second, "ShardAcquired on every shard Lease", func() bool {
		return countLeasesWith(t, direct, "evented", shards, EventShardAcquired) == shards
	})
	nodes[1].start(t)
	batontest.WaitFor(t, 30*time.Second, "the ring balanced", func() bool {
		return len(handles[0].Sharder().Owned()) == shards/2 && len(handles[1].Sharder().Owned()) == shards/2
	})
	batontest.WaitFor(t, 20*time.Second, "ShardHandedOver on the moved shards' Leases", leases(EventShardHandedOver))
	left := handles[1].Sharder().Owned()
	nodes[1].stop(t)
	// A replica that stops gracefully leaves the ring: it hands its shards to their
	// new owner, or releases them when there is none.
	for _, st := range left {
		lease := sharding.ShardLeaseName("evented", st.Shard)
		batontest.WaitFor(t, 20*time.Second, "the stopped replica's Event on "+lease, func() bool {
			for _, e := range leaseEventsOn(t, direct, lease) {
				if (e.Reason == EventShardHandedOver || e.Reason == EventShardReleased) &&
					strings.Contains(e.Note, "shard-events-1") && strings.Contains(e.Note, "graceful stop") {
					return true
				}
			}
			return false
		})
	}
	if got := countLeasesWith(t, direct, "evented", shards, EventShardDeathTakeover); got != 0 {
		t.Errorf("%d shard Leases have a %s Event, want none (nothing died)", got, EventShardDeathTakeover)
	}
}

// countLeasesWith returns how many of ring's shard Leases have an Event of reason.
func countLeasesWith(t *testing.T, c client.Client, ring string, shards int, reason string) int {
	t.Helper()
	n := 0
	for i := range shards {
		if slices.Contains(leaseEventReasons(t, c, sharding.ShardLeaseName(ring, i)), reason) {
			n++
		}
	}
	return n
}
