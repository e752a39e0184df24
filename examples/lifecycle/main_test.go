package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

func TestMain(m *testing.M) {
	if os.Getenv("BATON_TESTENV_VERBOSE") != "1" {
		slog.SetDefault(slog.New(slog.DiscardHandler))
	}
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

// probe is a leader-only component that hands out the context of each term.
type probe chan context.Context

func (p probe) Name() string { return "probe" }
func (p probe) Start(ctx context.Context) error {
	lifecycle.Subscribed(ctx)
	p <- ctx
	<-ctx.Done()
	return nil
}

// replica is one replica of the example in the test process. Only its lease client
// goes through the kit's switch: cut, it stops renewing while its process runs on.
type replica struct {
	*Replica
	kit   *batontest.Replica
	terms probe
}

func start(t *testing.T, env *batontest.Env, r *batontest.Replica) *replica {
	t.Helper()
	leaseClients, err := kubernetes.NewForConfig(r.Config())
	if err != nil {
		t.Fatal(err)
	}
	rep := &replica{kit: r, terms: make(probe, 16)}
	rep.Replica, err = Setup(env.Clientset(), leaseClients, "default", k8sle.Config{Identity: r.Name,
		LeaseName: "inventory", LeaseNamespace: "default", ReleaseOnCancel: true,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 400 * time.Millisecond})
	if err == nil {
		err = rep.Runtime.AddLeaderOnly(rep.terms)
	}
	if err != nil {
		t.Fatal(err)
	}
	rep.Bus.Start()
	r.Run(t, func(ctx context.Context) error {
		defer rep.Bus.Stop()
		return rep.Runtime.Run(ctx)
	})
	return rep
}

func leader(rs []*replica) *replica {
	for _, r := range rs {
		if r.kit.Running() && r.Elector.Elector().IsLeader() {
			return r
		}
	}
	return nil
}

// TestThreeReplicasHandOver: three replicas; the leader stops renewing, then the next
// one stops gracefully. Each new leader writes the current inventory, stamped with its
// term, the replica whose term ended has its write refused, and the summary's stamp
// never goes back.
func TestThreeReplicasHandOver(t *testing.T) {
	env := batontest.StartEnv(t)
	cs := env.Clientset()
	ctx := context.Background()
	monitor := batontest.WatchStamps(t, cs, TermAnnotation)
	label := func(name string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{InventoryLabel: "true"}}}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	summary := func(names string, term uint64) {
		t.Helper()
		batontest.WaitFor(t, 30*time.Second, fmt.Sprintf("summary %s in term %d", names, term), func() bool {
			cm, err := cs.CoreV1().ConfigMaps("default").Get(ctx, SummaryName, metav1.GetOptions{})
			return err == nil && cm.Data["names"] == names && cm.Annotations[TermAnnotation] == fmt.Sprint(term)
		})
	}
	label("a")
	var rs []*replica
	for _, r := range batontest.NewReplicas(t, 3, env.Config()) {
		rs = append(rs, start(t, env, r))
	}
	var first *replica
	batontest.WaitFor(t, 30*time.Second, "a leader", func() bool { first = leader(rs); return first != nil })
	term1 := first.Elector.Elector().Term()
	summary("[a]", term1)
	oldCtx := <-first.terms

	first.kit.Switch.Cut() // it stops renewing; its process runs on
	var second *replica
	batontest.WaitFor(t, 30*time.Second, "a new leader", func() bool { second = leader(rs); return second != nil && second != first })
	term2 := second.Elector.Elector().Term()
	summary("[a]", term2) // the replayed inventory, written at once
	label("b")
	summary("[a b]", term2)
	if err := first.Writer.Write(oldCtx, &Inventory{Names: []string{"stale"}}); !errors.Is(err, ErrTermEnded) {
		t.Fatalf("write in ended term %d: %v, want ErrTermEnded", term1, err)
	}
	first.kit.Switch.Heal()

	second.kit.Stop(t) // graceful: releases the lease
	var third *replica
	batontest.WaitFor(t, 30*time.Second, "a leader after the graceful stop", func() bool { third = leader(rs); return third != nil })
	term3 := third.Elector.Elector().Term()
	summary("[a b]", term3)
	label("c")
	summary("[a b c]", term3)
	if st := first.Runtime.Status(); !st.Running {
		t.Fatalf("%s stopped running after losing its term", first.kit.Name)
	}
	if err := monitor.Err(); err != nil {
		t.Fatal(err)
	}
}
