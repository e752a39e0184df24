package controllerruntime

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/incarnation"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// TestShardedDeathSignal: Options.DeathSignal applies to AddShardedController. Two
// Runtimes in pod environments run a sharded controller on shard Leases of 20s; one
// is cut off from the API server and stopped (its shard Leases stay held, its member
// Lease stays), the test plays the kubelet and reports its container terminated with
// the nonce New wrote; the other takes every shard well before the Leases would
// expire.
func TestShardedDeathSignal(t *testing.T) {
	const container, shards = "manager", 4
	lease20, renew15, retry1 := 20*time.Second, 15*time.Second, time.Second
	ctx := context.Background()
	direct, err := client.New(shared.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sharded-death-"}}
	if err := direct.Create(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	ns := namespace.Name
	cs, err := kubernetes.NewForConfig(shared.Config())
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*node
	var handles []*Sharded
	var logs []string
	for _, name := range []string{"sds-a", "sds-b"} {
		pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: container, Image: "baton"}}, AutomountServiceAccountToken: new(bool)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv(incarnation.EnvPodNamespace, ns)
		t.Setenv(incarnation.EnvPodName, name)
		t.Setenv(incarnation.EnvPodUID, string(pod.UID))
		t.Setenv(incarnation.EnvContainer, container)
		logFile := filepath.Join(t.TempDir(), "termination-log")
		mgr, err := manager.New(shared.Config(), manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
		if err != nil {
			t.Fatal(err)
		}
		n := &node{registry: prometheus.NewRegistry(), done: make(chan error, 1), mgr: mgr}
		n.rt, err = New(mgr, Options{
			LeaderElectionID: "single", LeaderElectionNamespace: ns, Identity: name,
			LeaseDuration: &lease20, RenewDeadline: &renew15, RetryPeriod: &retry1,
			LeaderElectionReleaseOnCancel: ptr.To(false), Clientset: cs, MetricsRegisterer: n.registry,
			TerminationMessagePath: logFile,
		})
		if err != nil {
			t.Fatal(err)
		}
		leases, err := kubernetes.NewForConfig(n.partition.Wrap(shared.Config()))
		if err != nil {
			t.Fatal(err)
		}
		h, err := n.rt.AddShardedController(ShardedController{
			Name:       "death",
			Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }),
			For:        &corev1.ConfigMap{},
			Clientset:  leases,
			Sharding: sharding.Config{Namespace: ns, Shards: shards,
				LeaseDuration: lease20, RenewDeadline: renew15, RetryPeriod: retry1},
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes, handles, logs = append(nodes, n), append(handles, h), append(logs, logFile)
	}
	a, b := handles[0], handles[1]
	nodes[0].start(t)
	batontest.WaitFor(t, 30*time.Second, "a to lead every shard", func() bool { return len(a.Sharder().Owned()) == shards })
	nodes[1].start(t)
	batontest.WaitFor(t, 30*time.Second, "a and b to lead half each", func() bool {
		return len(a.Sharder().Owned()) == shards/2 && len(b.Sharder().Owned()) == shards/2
	})
	// A state seen on a first look is waited out (it may be a restored copy): let b
	// see a renew each of its shards, every RetryPeriod.
	time.Sleep(3 * retry1)
	ofA := len(a.Sharder().Owned())
	nodes[0].partition.Cut()
	nodes[0].stop(t) // its leave fails: its shard Leases and its member Lease stay
	for _, name := range []string{sharding.MemberLeaseName("death", "sds-a"), sharding.ShardLeaseName("death", a.Sharder().Ring().Shards()-1)} {
		if _, err := cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatalf("lease %s after a stopped cut off: %v", name, err)
		}
	}
	if n := len(b.Sharder().Owned()); n != shards-ofA {
		t.Fatalf("b leads %d shards before a's death is reported, want %d", n, shards-ofA)
	}

	msg, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, "sds-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	pod.Status.Phase = corev1.PodFailed
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: container, Image: "baton", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", Message: string(msg), StartedAt: now, FinishedAt: now},
	}}}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	reported := time.Now()
	batontest.WaitFor(t, 30*time.Second, "b to lead every shard", func() bool { return len(b.Sharder().Owned()) == shards })
	took := time.Since(reported)
	t.Logf("b led a's %d shards %v after the kubelet's report", ofA, took)
	if took > 5*time.Second {
		t.Errorf("b led a's shards %v after the kubelet's report; the death signal should take over within a second or so (the leases last %v)", took, lease20)
	}
	// Each of a's shards was taken on the proof, and the metric counts them with the
	// single-leader Lease's takeover, if b made one.
	if got := b.Sharder().Stats().DeathTakeovers; got != uint64(ofA) {
		t.Errorf("b's Sharder counts %d death takeovers, want %d (a's shards)", got, ofA)
	}
	// b may take the single-leader Lease on a's death while this reads: the metric is
	// the shards' count plus the single Lease's, read before or after it.
	before := nodes[1].rt.elector.Elector().Stats().DeathTakeovers
	got := metricValue(t, nodes[1].registry, "baton_death_takeovers_total")
	after := nodes[1].rt.elector.Elector().Stats().DeathTakeovers
	if got != float64(uint64(ofA)+before) && got != float64(uint64(ofA)+after) {
		t.Errorf("baton_death_takeovers_total = %v, want %d (a's shards) plus the single Lease's %d or %d", got, ofA, before, after)
	}
}
