package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// envAPIHistories sets how many histories TestChaosAPIServer runs (default 3).
const envAPIHistories = "BATON_CHAOS_API_HISTORIES"

// envAPIRestarts, set to 1, adds one real restart of kube-apiserver to each history of
// TestChaosAPIServer, which then runs its histories one at a time (a soak fault: a
// restart takes seconds, so it is off by default).
const envAPIRestarts = "BATON_CHAOS_API_RESTARTS"

// apiOpts are the schedules on the real API server: the faults a client-side wrapper
// can inject there (lost and late replies, dropped requests, closed and lagging
// watches, 410 as all watches closing, lease deletion, partitions, pauses, restarts of
// candidates), 3
// candidates, a few seconds of faults.
var apiOpts = scheduleOpts{
	configs: []leaderelection.Config{{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}},
	weights: []weight{
		{flakyKind, 4}, {fWatchClosed, 2}, {fWatchLagged, 1}, {fGone, 1}, {fLeaseDeleted, 3}, {fPartition, 2},
		{fPause, 1}, {fCandRestart, 1},
	},
	phaseMin: 2, phaseMax: 2, faultMin: 6, faultMax: 10, cands: 3,
}

// kubeServer is the server side of the faults on the real API server: it deletes the
// Lease through the API, and stops and starts kube-apiserver (env); the runner closes
// the candidates' watches for a 410.
type kubeServer struct {
	cs        kubernetes.Interface
	env       *batontest.Env
	namespace string
	name      string
}

func (k *kubeServer) stopAPIServer() error { return k.env.StopAPIServer() }

func (k *kubeServer) startAPIServer() error { return k.env.StartAPIServer() }

func (k *kubeServer) breakWatches() int { return 0 }

func (k *kubeServer) deleteLease() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return k.cs.CoordinationV1().Leases(k.namespace).Delete(ctx, k.name, metav1.DeleteOptions{}) == nil
}

func (k *kubeServer) restore(int) (string, string, bool) { return "", "", false }

func (k *kubeServer) restart(time.Duration) {}

// TestChaosAPIServer runs a few seeded fault histories of 3 electors against a real
// kube-apiserver and etcd, in parallel on separate Leases, with the checker of
// TestChaos. Terms are sampled every few milliseconds on the real clock, and the
// checker uses only the parts of each belief that are certain. With
// BATON_CHAOS_API_RESTARTS=1 each history also restarts kube-apiserver once, and the
// histories run one at a time.
func TestChaosAPIServer(t *testing.T) {
	restarts := false
	switch s := os.Getenv(envAPIRestarts); s {
	case "", "0":
	case "1":
		restarts = true
	default:
		t.Fatalf("%s=%q: want 0 or 1", envAPIRestarts, s)
	}
	env := batontest.StartEnv(t)
	n := int64(3)
	if s := os.Getenv(envAPIHistories); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: not a number: %v", envAPIHistories, s, err)
		}
		n = v
	}
	list := make([]int64, n)
	for i := range list {
		list[i] = int64(i + 1)
	}
	if s := os.Getenv(envSeed); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: not a number: %v", envSeed, s, err)
		}
		list = []int64{v}
	}
	start := time.Now()
	sum := newSummary()
	// The histories sleep most of the time: run them all at once, not -parallel at a
	// time; with restarts one at a time, as a restart hits every history on the server.
	histories := make([]*history, len(list))
	var wg sync.WaitGroup
	for i, seed := range list {
		wg.Go(func() { histories[i] = runAPIServer(env, seed, restarts) })
		if restarts {
			wg.Wait()
		}
	}
	wg.Wait()
	t.Run("history", func(t *testing.T) {
		for i, seed := range list {
			t.Run(strconv.FormatInt(seed, 10), func(t *testing.T) {
				h := histories[i]
				res := check(h)
				sum.add(h, res)
				if len(res.violations) > 0 {
					t.Error(report(h, res))
				}
				if n := h.count.get(fRealAPIRestart); restarts && n != 1 {
					t.Errorf("seed %d: kube-apiserver restarted %d times, want 1\n%s", seed, n, report(h, res))
				}
				if res.terms == 0 || res.writes == 0 {
					t.Errorf("seed %d: %d terms, %d fenced writes: the history tested nothing\n%s", seed, res.terms, res.writes, report(h, res))
				}
			})
		}
	})
	t.Logf("chaos summary on the API server (wall %v):\n%s", time.Since(start).Round(time.Millisecond), sum)
}

// runAPIServer runs the history of seed on the Lease chaos-<seed>, with a restart of
// kube-apiserver if restarts.
func runAPIServer(env *batontest.Env, seed int64, restarts bool) *history {
	rng := rand.New(rand.NewPCG(uint64(seed), 0xba70))
	sched := newSchedule(rng, apiOpts)
	if restarts {
		sched.addRealRestart(rand.New(rand.NewPCG(uint64(seed), 0x5e57a27)))
	}
	cs := env.Clientset()
	name := fmt.Sprintf("chaos-%d", seed)
	return runHistory(seed, sched, world{
		srv: &kubeServer{cs: cs, env: env, namespace: "default", name: name}, lease: name, test: "TestChaosAPIServer",
		sample: 5 * time.Millisecond, slack: 2 * time.Second,
		view: func(string) leaderelection.LeaseStore {
			s, err := leaderelection.NewKubernetesStore(cs, "default", name)
			if err != nil {
				panic(err) // the arguments are constants
			}
			return s
		},
	})
}

// addRealRestart adds a restart of kube-apiserver at a random moment of the fault
// phase of apiOpts, down 1 to 4 s. It is drawn from an rng of its own, so that a seed
// keeps the faults it has without it.
func (s *schedule) addRealRestart(rng *rand.Rand) {
	phase := time.Duration(apiOpts.phaseMax) * s.cfg.LeaseDuration
	f := fault{
		at: time.Duration(rng.Int64N(int64(phase))), kind: fRealAPIRestart, target: leaderTarget,
		dur: time.Second + time.Duration(rng.Int64N(int64(3*time.Second))),
	}
	s.faults = append(s.faults, f)
	s.heal = max(s.heal, f.at+f.dur)
	slices.SortStableFunc(s.faults, func(a, b fault) int { return int(a.at - b.at) })
}
