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

	"github.com/baton-dev/baton/internal/replicatest"
	"github.com/baton-dev/baton/internal/testenv"
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

type replica struct {
	*Replica
	name   string
	lease  replicatest.Partition
	terms  probe
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, env *testenv.Env, name string) *replica {
	t.Helper()
	r := &replica{name: name, terms: make(probe, 16), done: make(chan error, 1)}
	leaseClients, err := kubernetes.NewForConfig(r.lease.Wrap(env.Config()))
	if err != nil {
		t.Fatal(err)
	}
	r.Replica, err = Setup(env.Clientset(), leaseClients, "default", k8sle.Config{Identity: name,
		LeaseName: "inventory", LeaseNamespace: "default", ReleaseOnCancel: true,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 400 * time.Millisecond})
	if err == nil {
		err = r.Runtime.AddLeaderOnly(r.terms)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.Bus.Start()
	go func() { r.done <- r.Runtime.Run(ctx); r.Bus.Stop() }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *replica) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("%s: Run returned %v", r.name, err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("%s: Run did not return", r.name)
	}
}

func leader(rs []*replica) *replica {
	for _, r := range rs {
		if r.cancel != nil && r.Elector.Elector().IsLeader() {
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
	env := testenv.Start(t)
	cs := env.Clientset()
	ctx := context.Background()
	monitor := replicatest.Watch(t, cs, TermAnnotation)
	label := func(name string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{InventoryLabel: "true"}}}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	summary := func(names string, term uint64) {
		t.Helper()
		replicatest.WaitFor(t, 30*time.Second, fmt.Sprintf("summary %s in term %d", names, term), func() bool {
			cm, err := cs.CoreV1().ConfigMaps("default").Get(ctx, SummaryName, metav1.GetOptions{})
			return err == nil && cm.Data["names"] == names && cm.Annotations[TermAnnotation] == fmt.Sprint(term)
		})
	}
	label("a")
	rs := []*replica{start(t, env, "r0"), start(t, env, "r1"), start(t, env, "r2")}
	var first *replica
	replicatest.WaitFor(t, 30*time.Second, "a leader", func() bool { first = leader(rs); return first != nil })
	term1 := first.Elector.Elector().Term()
	summary("[a]", term1)
	oldCtx := <-first.terms

	first.lease.Cut() // it stops renewing; its process runs on
	var second *replica
	replicatest.WaitFor(t, 30*time.Second, "a new leader", func() bool { second = leader(rs); return second != nil && second != first })
	term2 := second.Elector.Elector().Term()
	summary("[a]", term2) // the replayed inventory, written at once
	label("b")
	summary("[a b]", term2)
	if err := first.Writer.Write(oldCtx, &Inventory{Names: []string{"stale"}}); !errors.Is(err, ErrTermEnded) {
		t.Fatalf("write in ended term %d: %v, want ErrTermEnded", term1, err)
	}
	first.lease.Heal()

	second.stop(t) // graceful: releases the lease
	var third *replica
	replicatest.WaitFor(t, 30*time.Second, "a leader after the graceful stop", func() bool { third = leader(rs); return third != nil })
	term3 := third.Elector.Elector().Term()
	summary("[a b]", term3)
	label("c")
	summary("[a b c]", term3)
	if st := first.Runtime.Status(); !st.Running {
		t.Fatalf("%s stopped running after losing its term", first.name)
	}
	if err := monitor.Err(); err != nil {
		t.Fatal(err)
	}
}
