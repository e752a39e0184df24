package sharding

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// TestControllerThreeFiveRollingRestart runs a sharded controller
// (AddShardedController) over 200 ConfigMaps on a real API server with three
// replicas, then five, then replaces each of the five in turn by a new one (a new
// identity: graceful stop, then start, as a Deployment's rollout does), while the
// ConfigMaps keep changing. A reconcile stands for 10ms of work, 300ms for a tenth
// of the ConfigMaps (longer than a hand-over, so that a replica reconciling on after
// its shard's term ended would overlap the next owner: with the integration's wait
// for running reconciles taken out and the reconcile ignoring its context, this test
// fails). It records every reconcile as a span of time with its replica and the
// shard term of its context, and checks:
//
//   - after each step, every shard is led by exactly one live replica, none leading
//     more than ceil(S/N);
//   - no reconcile ran without its shard term or for an object of another shard, no
//     shard term was reconciled by two replicas, and no two replicas' reconciles of
//     one shard (so of one object) overlapped in time;
//   - after the last step, every ConfigMap's latest version (written after that
//     step) was read by a reconcile that ran to its end.
func TestControllerThreeFiveRollingRestart(t *testing.T) {
	const (
		objects = 200
		steps   = 5 // replicas replaced by the rollout
	)
	c := fleetConfig{
		name: "rolling", namespace: "rolling", shards: 32,
		lease: leaseDuration, renew: renewDeadline, retry: retryPeriod,
		work: 10 * time.Millisecond, slow: 300 * time.Millisecond, slowObjects: 20, workers: 4,
	}
	env := batontest.StartEnv(t)
	direct, err := client.New(env.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	createConfigMapsIn(t, direct, c.namespace, objects)
	ring, err := sharding.NewRing(c.shards)
	if err != nil {
		t.Fatal(err)
	}
	log := &reconcileLog{ring: ring}
	var live []*ctrlReplica
	defer func() {
		for _, r := range live {
			r.stop(t)
		}
	}()
	start := func(id string) { live = append(live, startCtrlReplica(t, env, c, id, log, nil)) }

	// Churn: the ConfigMaps keep changing throughout, so that events arrive while
	// shards move.
	ctx, stopChurn := context.WithCancel(context.Background())
	var churn sync.WaitGroup
	churned := 0
	churn.Go(func() {
		rng := rand.New(rand.NewPCG(18, 3))
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if touch(ctx, direct, c.namespace, fmt.Sprint("cm-", rng.IntN(objects))) == nil {
				churned++
			}
		}
	})
	defer func() { stopChurn(); churn.Wait() }()

	began := time.Now()
	for i := range 3 {
		start(fmt.Sprint("a", i))
	}
	waitBalancedReplicas(t, live, c.shards, "start of a0..a2", 20*time.Second)
	for i := 3; i < 5; i++ {
		start(fmt.Sprint("a", i))
	}
	waitBalancedReplicas(t, live, c.shards, "a3 and a4 joined", 15*time.Second)
	for i := range steps {
		live[0].stop(t)
		live = live[1:]
		start(fmt.Sprint("b", i))
		waitBalancedReplicas(t, live, c.shards, fmt.Sprintf("a%d replaced by b%d", i, i), 15*time.Second)
	}
	stopChurn()
	churn.Wait()

	// Every ConfigMap written once more after the last step: its latest version must
	// be reconciled.
	latest := map[string]string{}
	for i := range objects {
		name := fmt.Sprint("cm-", i)
		if err := touch(context.Background(), direct, c.namespace, name); err != nil {
			t.Fatal(err)
		}
	}
	var list corev1.ConfigMapList
	if err := direct.List(context.Background(), &list, client.InNamespace(c.namespace)); err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		if cm.Name != "kube-root-ca.crt" {
			latest[cm.Name] = cm.ResourceVersion
		}
	}
	if len(latest) != objects {
		t.Fatalf("%d ConfigMaps listed, want %d", len(latest), objects)
	}
	missing := func() []string {
		seen := log.seen()
		var out []string
		for name, v := range latest {
			if !seen[name][v] {
				out = append(out, name+"@"+v)
			}
		}
		return out
	}
	batontest.WaitFor(t, 15*time.Second, "every ConfigMap's latest version reconciled", func() bool { return len(missing()) == 0 })
	if m := missing(); len(m) > 0 { // WaitFor failed the test; say which
		t.Errorf("latest versions never reconciled: %v", m)
	}
	if _, err := shares(live, c.shards); err != nil {
		t.Errorf("at the end: %v", err)
	}
	for _, r := range live {
		r.stop(t)
	}
	n := log.check(t)
	t.Logf("%d reconciles by %v, %d churn writes, %v from the first start to the last check", n, log.replicasOf(), churned, time.Since(began).Round(time.Millisecond))
}

// touch writes ConfigMap name once more (a new "gen"), retrying on conflict.
func touch(ctx context.Context, c client.Client, ns, name string) error {
	for {
		var cm corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
			return err
		}
		gen, _ := strconv.Atoi(cm.Data["gen"])
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data["gen"] = strconv.Itoa(gen + 1)
		err := c.Update(ctx, &cm)
		if err == nil || !apierrors.IsConflict(err) {
			return err
		}
	}
}
