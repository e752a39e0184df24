package sharding

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
)

const (
	shards = 16
	// A planned move (join, graceful leave) may leave a shard without owner this long
	// at most: a release and a takeover on its watch event, with room for a loaded CI
	// machine (tens of milliseconds on an idle one; writes of a second under load).
	handoverGap = 2 * time.Second

	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = time.Second
)

// TestThreeReplicasJoinAndLeave runs three replicas of a ring on a real API server,
// then a fourth joins, one leaves gracefully and one crashes: every shard owned by one
// replica and the shares within one shard after each, no shard ever led by two,
// planned moves that leave no shard without owner longer than handoverGap, and a
// crashed replica's shards owned again about a LeaseDuration after the crash.
func TestThreeReplicasJoinAndLeave(t *testing.T) {
	env := batontest.StartEnv(t)
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

	// A crash: c is cut off from the API server. Its shards are owned again when its
	// Leases expire, a LeaseDuration after its last renew (plus a RetryPeriod for a
	// retry, plus the load of a CI machine).
	phase = time.Now()
	close(replicas["c"].down)
	waitBalanced(t, h, "crash of c", 30*time.Second, "a", "d")
	h.CheckGaps(t, "crash of c", phase, leaseDuration+2*retryPeriod+handoverGap)
	// Once its shards were taken, a or d deletes c's member Lease, which c never will.
	leases := kubernetes.NewForConfigOrDie(env.Config()).CoordinationV1().Leases("default")
	batontest.WaitFor(t, 2*leaseDuration, "the crashed c's member Lease deleted", func() bool {
		_, err := leases.Get(context.Background(), sharding.MemberLeaseName("ring", "c"), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})

	for _, r := range replicas {
		r.stop()
	}
	h.CheckNoOverlap(t)
	h.CheckAllEnded(t)
}

// TestKubeMembersExpire: Expire deletes a member Lease only in the version it names,
// on a real API server.
func TestKubeMembersExpire(t *testing.T) {
	env := batontest.StartEnv(t)
	clientset := kubernetes.NewForConfigOrDie(env.Config())
	members, err := sharding.NewKubeMembers(clientset, "default", "expire")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease := sharding.MemberLease{Identity: "x", LeaseDuration: leaseDuration}
	first, err := members.Renew(ctx, lease)
	if err != nil {
		t.Fatal(err)
	}
	second, err := members.Renew(ctx, lease)
	if err != nil {
		t.Fatal(err)
	}
	name := sharding.MemberLeaseName("expire", "x")
	if err := members.Expire(ctx, "x", first); err != nil {
		t.Errorf("Expire of a version written over: %v, want nil", err)
	}
	if _, err := clientset.CoordinationV1().Leases("default").Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("the Lease after an Expire of an older version: %v, want it kept", err)
	}
	if err := members.Expire(ctx, "x", second); err != nil {
		t.Errorf("Expire of the current version: %v", err)
	}
	if _, err := clientset.CoordinationV1().Leases("default").Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Lease after an Expire of its version: %v, want NotFound", err)
	}
	if err := members.Expire(ctx, "x", second); err != nil {
		t.Errorf("Expire of an absent Lease: %v, want nil", err)
	}
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
	down   chan struct{} // closing it cuts the replica off from the API server
}

func startReplica(t *testing.T, env *batontest.Env, id string, h *shardingtest.History) *replica {
	t.Helper()
	clientset, err := kubernetes.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	var logger *slog.Logger
	if os.Getenv("BATON_SHARDING_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("replica", id)
	}
	members, err := sharding.NewKubeMembers(clientset, "default", "ring")
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{done: make(chan struct{}), down: make(chan struct{})}
	stores := shardingtest.Cut(sharding.Stores{
		Members: members,
		Shard: func(i int) leaderelection.LeaseStore {
			s, err := leaderelection.NewKubernetesStore(clientset, "default", sharding.ShardLeaseName("ring", i))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}, r.down, 0)
	s, err := sharding.NewWithStores(sharding.Config{
		Identity: id, Name: "ring", Namespace: "default", Shards: shards,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
	}, stores, sharding.Callbacks{OnAcquired: h.OnAcquired(t, id)}, logger)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
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
