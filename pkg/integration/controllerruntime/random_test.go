package controllerruntime

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/baton-dev/baton/internal/testseed"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/termctx"
)

// stamper writes its term into every ConfigMap of one namespace, through the fenced
// client: each new term rewrites them all.
type stamper struct {
	reader client.Reader
	writer client.Client
	ns     string
}

func (s *stamper) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Namespace != s.ns {
		return reconcile.Result{}, nil
	}
	var cm corev1.ConfigMap
	if err := s.reader.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	term, _ := termctx.FromContext(ctx)
	if cm.Data["term"] == fmt.Sprint(term) {
		return reconcile.Result{}, nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data["term"] = fmt.Sprint(term)
	return reconcile.Result{}, s.writer.Update(ctx, &cm)
}

// randomFaultSeeds are the sequences TestRandomFaults runs in CI. BATON_SEED=<n> replays
// one; BATON_RANDOM_FAULTS_FRESH=<n> runs n sequences from fresh seeds (a soak).
var randomFaultSeeds = []uint64{1, 2}

// TestRandomFaults runs three replicas of a controller that stamps every object with
// its term and, for a seeded random sequence, takes the leader away by a partition of
// its lease client, a graceful stop or a crash (cancel without release), replacing
// stopped replicas. The checkers: every term rewrites every object (reconciles
// continue), and no object's stamp ever goes back (no ended term overwrote a newer
// one).
func TestRandomFaults(t *testing.T) {
	for _, seed := range faultSeeds(t) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { randomFaults(t, seed) })
	}
}

// faultSeeds returns the seeds TestRandomFaults runs: BATON_SEED's, or
// BATON_RANDOM_FAULTS_FRESH fresh ones, or randomFaultSeeds.
func faultSeeds(t *testing.T) []uint64 {
	v := os.Getenv("BATON_RANDOM_FAULTS_FRESH")
	if v == "" || os.Getenv(testseed.Env) != "" {
		return testseed.Seeds(t, randomFaultSeeds...)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("BATON_RANDOM_FAULTS_FRESH=%q: want a number of sequences, at least 1", v)
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = rand.Uint64()
	}
	return seeds
}

func randomFaults(t *testing.T, seed uint64) {
	t.Logf("seed %d (replay with BATON_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	raw := newClient(t)
	ns := newNamespace(t, raw)
	const objects = 5
	for i := range objects {
		if err := raw.Create(context.Background(), configMap(ns, fmt.Sprint("obj-", i))); err != nil {
			t.Fatal(err)
		}
	}
	monitor := batontest.WatchStamps(t, shared.Clientset(), TermAnnotation)
	lease := fmt.Sprintf("random-%d", seed%1_000_000)
	next := 0
	spawn := func() *node {
		n := newNodeRelease(t, fmt.Sprint("rnd-", next), lease, rng.IntN(2) == 0)
		next++
		err := n.rt.AddController(Controller{Name: "stamper", Watches: []Watch{{Object: &corev1.ConfigMap{}}},
			Reconciler: &stamper{reader: n.mgr.GetCache(), writer: n.rt.FencedClient(nil), ns: ns}})
		if err != nil {
			t.Fatal(err)
		}
		n.start(t)
		return n
	}
	nodes := []*node{spawn(), spawn(), spawn()}
	stamped := func(term uint64) bool {
		var list corev1.ConfigMapList
		if err := raw.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return false
		}
		n := 0
		for _, cm := range list.Items {
			if cm.Annotations[TermAnnotation] == fmt.Sprint(term) && cm.Data["term"] == fmt.Sprint(term) {
				n++
			}
		}
		return n == objects
	}
	var last uint64
	for round := range 4 {
		var leader *node
		var term uint64
		batontest.WaitFor(t, 30*time.Second, fmt.Sprintf("round %d: a leader (seed %d)", round, seed), func() bool {
			for _, n := range nodes {
				if term = n.rt.Term(); term > last {
					leader = n
					return true
				}
			}
			return false
		})
		batontest.WaitFor(t, 30*time.Second, fmt.Sprintf("round %d: every object stamped by term %d (seed %d)", round, term, seed),
			func() bool { return stamped(term) })
		last = term
		switch fault := rng.IntN(3); fault {
		case 0: // stops renewing; its process runs on and campaigns again once healed
			leader.partition.Cut()
			batontest.WaitFor(t, 30*time.Second, fmt.Sprintf("round %d: the partitioned leader's term to end (seed %d)", round, seed),
				func() bool { return !leader.rt.IsLeader() })
			leader.partition.Heal()
		default: // stops, releasing or not as it was built; a new replica replaces it
			leader.stop(t)
			for i, n := range nodes {
				if n == leader {
					nodes[i] = spawn()
				}
			}
		}
		if err := monitor.Err(); err != nil {
			t.Fatalf("round %d (seed %d): %v", round, seed, err)
		}
	}
}
