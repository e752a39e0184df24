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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestShardLeaseEvents: a sharded controller records on each shard Lease one Event
// per change of hands, by the replica that took it, with why: ShardAcquired on every
// shard when the first replica takes them all; on the shards handed to a second that
// joined, its ShardAcquired saying the previous holder handed the Lease to it, and no
// Event of the first (which handed them over); again the first's when the second
// stops gracefully and hands them back.
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
	// acquired waits for n Events of who acquiring each of moved's shards, with a
	// note containing why (the first's: the recorder keeps the Events of one replica,
	// reason and Lease as one series).
	acquired := func(who, why string, n int, moved []sharding.ShardTerm) {
		t.Helper()
		for _, st := range moved {
			lease := sharding.ShardLeaseName("evented", st.Shard)
			batontest.WaitFor(t, 20*time.Second, fmt.Sprintf("%d of %s's %s Events on %s", n, who, EventShardAcquired, lease), func() bool {
				got := 0
				for _, e := range leaseEventsOn(t, direct, lease) {
					if e.Reason == EventShardAcquired && strings.Contains(e.Note, who+" ") && strings.Contains(e.Note, why) {
						got++
						if e.Series != nil { // the recorder counts a like Event in the first's series
							got += int(e.Series.Count) - 1
						}
					}
				}
				return got >= n
			})
		}
	}
	moved := handles[1].Sharder().Owned()
	acquired("shard-events-1", "the previous holder handed the Lease to it", 1, moved)
	nodes[1].stop(t)
	batontest.WaitFor(t, 30*time.Second, "the first replica leading every shard again", func() bool {
		return len(handles[0].Sharder().Owned()) == shards
	})
	// Handed back, or released naming it if the leaver had not yet seen it renew
	// (docs/design/sharding.md, # Hand-over targets): its second term either way,
	// counted in its first Event's series.
	acquired("shard-events-0", "became owner", 2, moved)
	for _, st := range moved {
		// One Event per change of hands: the replica that handed a shard over records
		// none of its own; every Event on a moved shard's Lease is an acquisition, and
		// regards the Lease by its UID (kubectl describe matches Events by it).
		name := sharding.ShardLeaseName("evented", st.Shard)
		lease, err := shared.Clientset().CoordinationV1().Leases("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range leaseEventsOn(t, direct, name) {
			if e.Reason != EventShardAcquired {
				t.Errorf("shard %d: a %s Event (%q), want only %s: a hand-over is recorded by its taker",
					st.Shard, e.Reason, e.Note, EventShardAcquired)
			}
			if e.Regarding.UID != lease.UID {
				t.Errorf("shard %d: an Event regarding UID %q, want the Lease's, %q", st.Shard, e.Regarding.UID, lease.UID)
			}
		}
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
