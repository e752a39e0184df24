package sharding

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
)

// TestReplicasOfDifferentShardCountsNeverOwnAnObjectTogether pins issue 25's defect 3
// on a real API server: one replica of ring "shape" at S=4 leads every shard, then
// one at S=8 starts (a rolling update that changes Shards). Before the fix, each led
// shards of its own shape at once: "shape-shard-i" means a different hash range to
// each, so objects were reconciled by both. Now the one at S=8 sees the other's shape
// on its member Lease, refuses to campaign (Refusing, Stats.ShapeRefusals), and leads
// nothing; the one at S=4 counts it as mismatched (Mismatched). When the S=4 replica
// leaves, the S=8 one takes the ring: a deliberate change of S without refusing
// forever. Over 10,000 UIDs, no object is owned by both at any time.
func TestReplicasOfDifferentShardCountsNeverOwnAnObjectTogether(t *testing.T) {
	env := batontest.StartEnv(t)
	log := &shardingtest.Shapes{}
	r4 := startShaped(t, env, "old", 4, log)
	defer r4.stop()
	waitFor(t, "the S=4 replica leads all 4 shards", 30*time.Second, func() bool { return len(r4.sharder.Owned()) == 4 })

	r8 := startShaped(t, env, "new", 8, log)
	defer r8.stop()
	waitFor(t, "the S=8 replica refuses", 30*time.Second, func() bool { return r8.sharder.Refusing() })
	waitFor(t, "the S=4 replica sees the mismatch", 30*time.Second, func() bool { return len(r4.sharder.Mismatched()) == 1 })
	time.Sleep(2 * leaseDuration) // long enough for any wrong campaign to win
	if got := r8.sharder.Owned(); len(got) != 0 {
		t.Errorf("the S=8 replica leads %v while an S=4 replica is active, want none", got)
	}
	if got := len(r4.sharder.Owned()); got != 4 {
		t.Errorf("the S=4 replica leads %d shards beside a refusing S=8 replica, want all 4", got)
	}
	if st := r8.sharder.Stats(); st.ShapeRefusals == 0 {
		t.Errorf("the S=8 replica's stats %+v: want ShapeRefusals > 0", st)
	}

	r4.stop()
	waitFor(t, "the S=8 replica leads all 8 shards once the S=4 one left", 30*time.Second,
		func() bool { return len(r8.sharder.Owned()) == 8 })
	if r8.sharder.Refusing() {
		t.Error("the S=8 replica still refuses after the S=4 one left")
	}
	r8.stop()
	if n := log.DoublyOwned(randomUIDs(10000)); n != 0 {
		t.Errorf("%d of 10000 objects were owned by both replicas at once, want 0", n)
	}
}

type shapedReplica struct {
	sharder *sharding.Sharder
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once
}

// startShaped runs a replica of ring "shape" at S shards with sharding.New, the
// Kubernetes stores.
func startShaped(t *testing.T, env *batontest.Env, id string, shards int, log *shardingtest.Shapes) *shapedReplica {
	t.Helper()
	clientset, err := kubernetes.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("BATON_SHARDING_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("replica", id)
	}
	ring, err := sharding.NewRing(shards)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sharding.New(sharding.Config{
		Identity: id, Name: "shape", Namespace: "default", Shards: shards,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
	}, clientset, sharding.Callbacks{OnAcquired: log.OnAcquired(id, ring)}, logger)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &shapedReplica{sharder: s, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := s.Run(ctx); err != nil {
			t.Errorf("Run of %s: %v", id, err)
		}
	}()
	return r
}

func (r *shapedReplica) stop() {
	r.once.Do(r.cancel)
	<-r.done
}

// waitFor polls cond every 50ms, failing t with what after timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func randomUIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = uuid.NewString()
	}
	return out
}
