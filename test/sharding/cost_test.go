package sharding

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// TestQuietRingCost measures what a quiet ring costs the API server (issue 27,
// "Renewal cost independent of S"): N=5 replicas of a ring of S shards, balanced,
// then 10 RetryPeriods with nothing happening, counting every request of every
// replica: Lease writes (creates and updates) per RetryPeriod, watches open per
// replica, and the watch events delivered (each Lease write reaches every replica,
// whose one watch selects the ring's Leases by label). It runs S=16 and checks the
// design's bounds (docs/design/sharding-renewal.md): at most N+1 Lease writes per
// RetryPeriod, no shard Lease written, and at most maxWatchesPerReplica watches open
// per replica, whatever S; BATON_RING_COST=16,64,256 measures and checks those
// instead and logs the figures.
func TestQuietRingCost(t *testing.T) {
	sizes := []int{16}
	if v := os.Getenv("BATON_RING_COST"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				t.Fatalf("BATON_RING_COST=%q: %v", v, err)
			}
			sizes = append(sizes, n)
		}
	}
	env := batontest.StartEnv(t)
	const n = 5
	for _, s := range sizes {
		t.Run(fmt.Sprint("S=", s), func(t *testing.T) {
			c := measureQuietRing(t, env, n, s)
			t.Logf("N=%d S=%d: %.1f Lease writes per RetryPeriod (%.1f shard, %.1f member), %.1f watch events delivered per RetryPeriod, %.1f watches open per replica",
				n, s, c.writes, c.shardWrites, c.memberWrites, c.events, c.watches)
			if c.writes > n+1 {
				t.Errorf("%.1f Lease writes per RetryPeriod, want at most N+1 = %d", c.writes, n+1)
			}
			if c.shardWrites != 0 {
				t.Errorf("%.1f shard Lease writes per RetryPeriod on a quiet ring, want 0", c.shardWrites)
			}
			if c.watches > maxWatchesPerReplica {
				t.Errorf("%.1f watches open per replica, want at most %d whatever S", c.watches, maxWatchesPerReplica)
			}
		})
	}
}

// maxWatchesPerReplica bounds the watches a replica of a quiet ring holds: its one
// watch of the ring's Leases, and one more for a watch being replaced.
const maxWatchesPerReplica = 2

// ringCost is what a quiet ring cost per RetryPeriod.
type ringCost struct {
	writes, shardWrites, memberWrites, events, watches float64
}

// measureQuietRing runs n replicas of a ring of s shards in a namespace of its own,
// waits until they are balanced and quiet, and counts their requests over 10
// RetryPeriods.
func measureQuietRing(t *testing.T, env *batontest.Env, n, s int) ringCost {
	cs, err := kubernetes.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cost-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counts := &requestCounts{}
	sharders := make([]*sharding.Sharder, n)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); wg.Wait() }()
	for i := range sharders {
		cfg := env.Config()
		cfg.QPS, cfg.Burst = -1, 0 // no client-side limit: measure what the ring asks for
		cfg.Wrap(counts.wrap)
		rcs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		sharders[i], err = sharding.New(sharding.Config{
			Identity: fmt.Sprint("r", i), Name: "cost", Namespace: ns.Name, Shards: s,
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		}, rcs, sharding.Callbacks{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = sharders[i].Run(ctx) })
	}
	// A ring of 256 shards at RetryPeriod 1s did not balance within 2 minutes under
	// -race on 2 shared cores: give large rings longer.
	waitFor(t, fmt.Sprintf("%d replicas balanced over %d shards", n, s), 120*time.Second+time.Duration(s)*time.Second, func() bool {
		total := 0
		for _, sh := range sharders {
			owned := len(sh.Owned())
			if owned < s/n || owned > (s+n-1)/n {
				return false
			}
			total += owned
		}
		return total == s
	})
	time.Sleep(3 * retryPeriod) // the last hand-overs' writes
	before := counts.snapshot()
	const periods = 10
	time.Sleep(periods * retryPeriod)
	after := counts.snapshot()
	shardWrites := float64(after.shardWrites-before.shardWrites) / periods
	memberWrites := float64(after.memberWrites-before.memberWrites) / periods
	return ringCost{
		writes: shardWrites + memberWrites, shardWrites: shardWrites, memberWrites: memberWrites,
		// Every replica's watch of the ring's Leases delivers every write.
		events:  float64(n) * (shardWrites + memberWrites),
		watches: float64(after.watchesOpen) / float64(n),
	}
}

// requestCounts counts the requests of the replicas' clients.
type requestCounts struct {
	shardWrites, memberWrites, watchesOpen atomic.Int64
}

type countSnapshot struct{ shardWrites, memberWrites, watchesOpen int64 }

func (c *requestCounts) snapshot() countSnapshot {
	return countSnapshot{c.shardWrites.Load(), c.memberWrites.Load(), c.watchesOpen.Load()}
}

func (c *requestCounts) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		isLease := strings.Contains(req.URL.Path, "/leases")
		write := req.Method == http.MethodPost || req.Method == http.MethodPut
		switch {
		case isLease && write && strings.Contains(req.URL.Path, "-member-"):
			c.memberWrites.Add(1)
		case isLease && write:
			c.shardWrites.Add(1)
		case isLease && req.URL.Query().Get("watch") == "true":
			c.watchesOpen.Add(1)
			resp, err := rt.RoundTrip(req)
			if err != nil || resp == nil {
				c.watchesOpen.Add(-1)
				return resp, err
			}
			resp.Body = &closeCounter{ReadCloser: resp.Body, done: func() { c.watchesOpen.Add(-1) }}
			return resp, nil
		}
		return rt.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// closeCounter calls done once when the body is closed.
type closeCounter struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (c *closeCounter) Close() error {
	c.once.Do(c.done)
	return c.ReadCloser.Close()
}
