package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/baton-dev/baton/pkg/batontest"
	batoncr "github.com/baton-dev/baton/pkg/integration/controllerruntime"
)

// replica is one in-process replica: its manager, runtime, and the contexts its
// leader-only probe was given, one per term. All its requests go through the kit's
// switch; the watches its cache opened before the switch holds or cuts stay open, so
// its manager runs on.
type replica struct {
	*batontest.Replica
	mgr     ctrl.Manager
	rt      *batoncr.Runtime
	termCtx chan context.Context
}

func startReplica(t *testing.T, env *batontest.Env, kit *batontest.Replica, source types.NamespacedName) *replica {
	t.Helper()
	r := &replica{Replica: kit, termCtx: make(chan context.Context, 16)}
	lease, renew, retry := 3*time.Second, 2*time.Second, 400*time.Millisecond
	cs, err := kubernetes.NewForConfig(kit.Config())
	if err != nil {
		t.Fatal(err)
	}
	r.mgr, r.rt, err = Setup(Config{Rest: kit.Config(), Source: source, LeaseNamespace: "default", HealthAddr: "0",
		Runtime: batoncr.Options{Identity: kit.Name, LeaseDuration: &lease, RenewDeadline: &renew, RetryPeriod: &retry,
			Clientset: cs, MetricsRegisterer: prometheus.NewRegistry()}})
	if err != nil {
		t.Fatal(err)
	}
	// A probe: the context of each of this replica's terms, to write with after it ended.
	err = r.rt.AddLeaderOnly("probe", func(ctx context.Context) error {
		batoncr.Subscribed(ctx)
		r.termCtx <- ctx
		<-ctx.Done()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	kit.Run(t, r.mgr.Start)
	return r
}

func leader(rs []*replica) *replica {
	for _, r := range rs {
		if r.Running() && r.rt.IsLeader() {
			return r
		}
	}
	return nil
}

// TestThreeReplicasHandOver runs three replicas, loses the leader twice (it stops
// renewing, then it shuts down gracefully) and checks that the mirrors follow every
// change of the source, stamped by the current term, that a replica whose term ended
// has its writes refused, and that no object's term stamp ever goes back.
func TestThreeReplicasHandOver(t *testing.T) {
	env := batontest.StartEnv(t)
	cs := env.Clientset()
	ctx := context.Background()
	monitor := batontest.WatchStamps(t, cs, batoncr.TermAnnotation)
	for _, ns := range []string{"src", "team-a", "team-b", "team-c", "other"} {
		labels := map[string]string{MirrorLabel: "true"}
		if ns == "other" {
			labels = nil
		}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	source := types.NamespacedName{Namespace: "src", Name: "shared"}
	setSource := func(v string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: source.Namespace, Name: source.Name}, Data: map[string]string{"v": v}}
		_, err := cs.CoreV1().ConfigMaps(source.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			_, err = cs.CoreV1().ConfigMaps(source.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// mirrored waits until every labelled namespace holds v, written in term.
	mirrored := func(v string, term uint64, namespaces ...string) {
		t.Helper()
		batontest.WaitFor(t, 30*time.Second, fmt.Sprintf("mirrors of %q in term %d", v, term), func() bool {
			for _, ns := range namespaces {
				cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, source.Name, metav1.GetOptions{})
				if err != nil || cm.Data["v"] != v || cm.Annotations[batoncr.TermAnnotation] != fmt.Sprint(term) {
					return false
				}
			}
			return true
		})
	}
	setSource("v1")
	var rs []*replica
	for _, kit := range batontest.NewReplicas(t, 3, env.Config()) {
		rs = append(rs, startReplica(t, env, kit, source))
	}
	var first *replica
	batontest.WaitFor(t, 30*time.Second, "a leader", func() bool { first = leader(rs); return first != nil })
	term1 := first.rt.Term()
	mirrored("v1", term1, "team-a", "team-b", "team-c")
	oldCtx := <-first.termCtx

	// The leader's requests are held in flight: it stops renewing, its manager runs
	// on, and a mirror write it makes in its term reaches the API server only later,
	// after the next leader wrote.
	first.Switch.Hold()
	late, err := cs.CoreV1().ConfigMaps("team-a").Get(ctx, source.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	late.Data = map[string]string{"v": "held in flight"}
	lateDone := make(chan error, 1)
	go func() { lateDone <- first.rt.FencedClient(nil).Update(oldCtx, late) }()
	batontest.WaitFor(t, 30*time.Second, "the old leader's mirror write held in flight", func() bool {
		return slices.Contains(first.Switch.Held(), "PUT /api/v1/namespaces/team-a/configmaps/"+source.Name)
	})
	var second *replica
	batontest.WaitFor(t, 30*time.Second, "a new leader", func() bool {
		second = leader(rs)
		return second != nil && second != first
	})
	term2 := second.rt.Term()
	if term2 <= term1 {
		t.Fatalf("term went from %d to %d", term1, term2)
	}
	setSource("v2")
	mirrored("v2", term2, "team-a", "team-b", "team-c")
	// The old leader is alive, and its term's writes are refused.
	if first.rt.IsLeader() {
		t.Fatalf("%s still leads after %s took term %d", first.Name, second.Name, term2)
	}
	stale, err := cs.CoreV1().ConfigMaps("team-a").Get(ctx, source.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale.Data = map[string]string{"v": "from an ended term"}
	if err := first.rt.FencedClient(nil).Update(oldCtx, stale); !errors.Is(err, batoncr.ErrTermEnded) {
		t.Fatalf("write in ended term %d: got %v, want ErrTermEnded", term1, err)
	}
	if exited, err := first.Exited(); exited {
		t.Fatalf("%s's manager exited on losing the lease: %v", first.Name, err)
	}
	// Its caller gave up when term 1 ended; the held write arrives now all the same,
	// after term 2 wrote every copy, and the API server refuses it (its
	// resourceVersion is gone): the copies stay term 2's, and the monitor sees no
	// stamp go back.
	if err := <-lateDone; err == nil {
		t.Fatal("the held write of the ended term returned no error")
	}
	first.Switch.Heal()
	mirrored("v2", term2, "team-a", "team-b", "team-c")

	// The new leader shuts down gracefully; it releases the lease.
	second.Stop(t)
	var third *replica
	batontest.WaitFor(t, 30*time.Second, "a leader after the graceful stop", func() bool { third = leader(rs); return third != nil })
	term3 := third.rt.Term()
	if term3 <= term2 {
		t.Fatalf("term went from %d to %d", term2, term3)
	}
	// Reconciles continue: a source change, and a namespace labelled now.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-d", Labels: map[string]string{MirrorLabel: "true"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setSource("v3")
	mirrored("v3", term3, "team-a", "team-b", "team-c", "team-d")
	if _, err := cs.CoreV1().ConfigMaps("other").Get(ctx, source.Name, metav1.GetOptions{}); err == nil {
		t.Error("the unlabelled namespace got a mirror")
	}
	if err := monitor.Err(); err != nil {
		t.Fatal(err)
	}
	if monitor.Seen() < 9 {
		t.Fatalf("the monitor saw %d stamped writes, want at least 9", monitor.Seen())
	}
}
