package sharding

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/internal/testenv"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
)

const (
	shards = 16
	// A planned move (join, graceful leave) may leave a shard without owner this long
	// at most: a release and a takeover on its watch event, with room for a loaded CI
	// machine (tens of milliseconds on an idle one; writes of a second under load).
	handoverGap = 2 * time.Second
)

// TestThreeReplicasJoinAndLeave runs three replicas of a ring on a real API server,
// then a fourth joins and one leaves gracefully: every shard owned by one replica
// and the shares within one shard after each, no shard ever led by two, and planned
// moves that leave no shard without owner longer than handoverGap.
func TestThreeReplicasJoinAndLeave(t *testing.T) {
	env := testenv.Start(t)
	h := shardingtest.NewHistory(shards)
	replicas := map[string]*replica{}
	start := func(id string) { replicas[id] = startReplica(t, env, id, h) }
	defer func() {
		for _, r := range replicas {
			r.stop()
		}
	}()

	for _, id := range []string{"a", "b", "c"} {
		start(id)
	}
	waitBalanced(t, h, "start", 30*time.Second, "a", "b", "c")

	phase := time.Now()
	start("d")
	waitBalanced(t, h, "join of d", 15*time.Second, "a", "b", "c", "d")
	h.CheckGaps(t, "join of d", phase, handoverGap)

	phase = time.Now()
	replicas["b"].stop()
	waitBalanced(t, h, "graceful leave of b", 15*time.Second, "a", "c", "d")
	h.CheckGaps(t, "graceful leave of b", phase, handoverGap)

	for _, r := range replicas {
		r.stop()
	}
	h.CheckNoOverlap(t)
	h.CheckAllEnded(t)
}

// waitBalanced waits until h is balanced over members, failing t after timeout.
func waitBalanced(t *testing.T, h *shardingtest.History, after string, timeout time.Duration, members ...string) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		changed := h.Changed()
		if _, err := h.Balanced(members...); err == nil {
			h.CheckBalanced(t, after, members...)
			return
		}
		select {
		case <-changed:
		case <-deadline:
			_, err := h.Balanced(members...)
			t.Fatalf("after %s: not balanced within %v: %v", after, timeout, err)
		}
	}
}

type replica struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startReplica(t *testing.T, env *testenv.Env, id string, h *shardingtest.History) *replica {
	t.Helper()
	clientset, err := kubernetes.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	var logger *slog.Logger
	if os.Getenv("BATON_SHARDING_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("replica", id)
	}
	s, err := sharding.New(sharding.Config{
		Identity: id, Name: "ring", Namespace: "default", Shards: shards,
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: time.Second,
	}, clientset, sharding.Callbacks{OnAcquired: h.OnAcquired(t, id)}, logger)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := s.Run(ctx); err != nil {
			t.Errorf("Run of %s: %v", id, err)
		}
	}()
	return r
}

// stop leaves gracefully and waits for Run to return.
func (r *replica) stop() {
	r.cancel()
	<-r.done
}
