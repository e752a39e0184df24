package controllerruntime

import (
	"context"
	"os"
	"path/filepath"
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
)

// leaseEventReasons returns the reasons of the Events on the Lease name in default
// recorded by reporter.
func leaseEventReasons(t *testing.T, c client.Client, name string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := c.List(context.Background(), &list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Lease" && e.Regarding.Name == name && e.ReportingController == eventRecorderName {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
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
