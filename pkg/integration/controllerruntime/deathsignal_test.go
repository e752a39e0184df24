package controllerruntime

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/baton-dev/baton/pkg/batontest"

	"github.com/baton-dev/baton/pkg/k8s/incarnation"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// TestDeathSignalOption: by default the death signal is on in a pod and off outside
// one, and off with a WARN naming the missing variables in a partial pod environment
// (a manifest from before the death signal); true requires a pod, and a partial
// environment is then an error naming the missing variables and the field; false
// turns it off.
func TestDeathSignalOption(t *testing.T) {
	inPod := map[string]string{
		incarnation.EnvPodNamespace: "ns", incarnation.EnvPodName: "op-0",
		incarnation.EnvPodUID: "0f1e2d3c-0000-4000-8000-000000000002", incarnation.EnvContainer: "manager",
	}
	partial := map[string]string{incarnation.EnvPodUID: "0f1e2d3c-0000-4000-8000-000000000002"}
	for _, tc := range []struct {
		name    string
		option  *bool
		env     map[string]string
		on      bool
		wantErr []string
		wantLog string
	}{
		{name: "default in a pod", env: inPod, on: true, wantLog: "death signal on"},
		{name: "default not in a pod", wantLog: "not running in a pod"},
		// Development containers set CONTAINER_NAME too.
		{name: "default CONTAINER_NAME alone", env: map[string]string{incarnation.EnvContainer: "dev"}, wantLog: "not running in a pod"},
		{name: "true CONTAINER_NAME alone", option: ptr.To(true), env: map[string]string{incarnation.EnvContainer: "dev"}, wantErr: []string{"DeathSignal", "POD_NAMESPACE", "POD_NAME", "POD_UID"}},
		{name: "default partial", env: partial, wantLog: "level=WARN msg=\"death signal off: the pod environment is incomplete"},
		{name: "true partial", option: ptr.To(true), env: partial, wantErr: []string{"DeathSignal", "POD_NAMESPACE", "POD_NAME", "CONTAINER_NAME"}},
		{name: "true in a pod", option: ptr.To(true), env: inPod, on: true, wantLog: "death signal on"},
		{name: "true not in a pod", option: ptr.To(true), wantErr: []string{"DeathSignal", "not running in a pod"}},
		{name: "false in a pod", option: ptr.To(false), env: inPod, wantLog: "DeathSignal false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{incarnation.EnvPodNamespace, incarnation.EnvPodName, incarnation.EnvPodUID, incarnation.EnvContainer} {
				t.Setenv(k, tc.env[k])
			}
			logFile := filepath.Join(t.TempDir(), "termination-log")
			o := Options{DeathSignal: tc.option, TerminationMessagePath: logFile}
			var logs bytes.Buffer
			var election k8sle.Config
			w, err := o.deathSignal(&election, fake.NewClientset(), slog.New(slog.NewTextHandler(&logs, nil)))
			if tc.wantErr != nil {
				if !errors.Is(err, ErrInvalidOptions) {
					t.Fatalf("error %v, want one wrapping ErrInvalidOptions", err)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not name %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(logs.String(), tc.wantLog) {
				t.Errorf("logs %q, want %q", logs.String(), tc.wantLog)
			}
			if !tc.on {
				if w != nil || election.Incarnation != "" || election.DeathWatch != nil {
					t.Errorf("death signal set (watcher %v, incarnation %q, death watch %v), want off", w, election.Incarnation, election.DeathWatch)
				}
				if _, err := os.Stat(logFile); !os.IsNotExist(err) {
					t.Errorf("termination message file written (%v), want untouched", err)
				}
				return
			}
			if w == nil || election.DeathWatch == nil {
				t.Fatalf("watcher %v, death watch %v: want both", w, election.DeathWatch)
			}
			inc, err := incarnation.Parse(election.Incarnation)
			if err != nil {
				t.Fatalf("recorded incarnation %q: %v", election.Incarnation, err)
			}
			if inc.PodName != "op-0" || inc.Container != "manager" {
				t.Errorf("incarnation %+v, want pod op-0, container manager", inc)
			}
			msg, err := os.ReadFile(logFile)
			if err != nil || !strings.Contains(string(msg), inc.TerminationLine()) {
				t.Errorf("termination message file %q (%v), want %q", msg, err, inc.TerminationLine())
			}
			w.Wait()
		})
	}
}

// TestDeathSignalTakesOverAtOnce: two Runtimes in pod environments on a lease of 20s;
// the leader stops without releasing, the test plays the kubelet and reports its
// container terminated with the nonce New wrote; the follower takes the lease well
// before the lease would expire.
func TestDeathSignalTakesOverAtOnce(t *testing.T) {
	const ns, lease, container = "default", "deathsignal", "manager"
	lease20, renew15, retry1 := 20*time.Second, 15*time.Second, time.Second
	cs, err := kubernetes.NewForConfig(shared.Config())
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*node
	var logs []string
	for _, name := range []string{"ds-a", "ds-b"} {
		pod, err := cs.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: container, Image: "baton"}}, AutomountServiceAccountToken: new(bool)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		})
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
			LeaderElectionID: lease, LeaderElectionNamespace: ns, Identity: name,
			LeaseDuration: &lease20, RenewDeadline: &renew15, RetryPeriod: &retry1,
			LeaderElectionReleaseOnCancel: ptr.To(false), Clientset: cs, MetricsRegisterer: n.registry,
			TerminationMessagePath: logFile,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.rt.AddLeaderOnly("wait", func(ctx context.Context) error { Subscribed(ctx); <-ctx.Done(); return nil }); err != nil {
			t.Fatal(err)
		}
		nodes, logs = append(nodes, n), append(logs, logFile)
	}
	nodes[0].start(t)
	batontest.WaitFor(t, 30*time.Second, "a to lead", func() bool { return nodes[0].rt.Term() != 0 })
	nodes[1].start(t)
	batontest.WaitFor(t, 30*time.Second, "b to see a", func() bool { return nodes[1].rt.GetLeader() == "ds-a" })
	// A state seen on a first look is waited out (it may be a restored copy): let b see
	// a renew. Two renews after b saw a, b's watch has delivered the first.
	seen, err := cs.CoordinationV1().Leases(ns).Get(t.Context(), lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	renews := 0
	batontest.WaitFor(t, 30*time.Second, "a to renew twice", func() bool {
		l, err := cs.CoordinationV1().Leases(ns).Get(t.Context(), lease, metav1.GetOptions{})
		if err == nil && l.ResourceVersion != seen.ResourceVersion {
			seen, renews = l, renews+1
		}
		return renews >= 2
	})
	nodes[0].stop(t) // no release: only the death signal or the lease's expiry lets b lead

	msg, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods(ns).Get(t.Context(), "ds-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	pod.Status.Phase = corev1.PodFailed
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: container, Image: "baton", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", Message: string(msg), StartedAt: now, FinishedAt: now},
	}}}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	reported := time.Now()
	batontest.WaitFor(t, 30*time.Second, "b to lead", func() bool { return nodes[1].rt.Term() != 0 })
	took := time.Since(reported)
	t.Logf("b led %v after the kubelet's report", took)
	if took > 5*time.Second {
		t.Errorf("b led %v after the kubelet's report; the death signal should take over within a second or so (the lease lasts %v)", took, lease20)
	}
	assertMetric(t, nodes[1].registry, "baton_death_takeovers_total", 1)
}
