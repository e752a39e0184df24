package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// refusalRecorder is a Reconciler that writes the replica's name into the ConfigMap
// through the fenced client and records every write the fence refused while the
// shard's term still ran: ErrTermEnded of a live term, or ErrStaleTerm (in these
// tests no term of the shard ever stamps more than the writer's own, so a newer stamp
// is one of no term, which the shard's holder overwrites).
type refusalRecorder struct {
	replica string
	reader  client.Reader
	writer  client.Client

	mu      sync.Mutex
	refused []string
}

func (w *refusalRecorder) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var cm corev1.ConfigMap
	if err := w.reader.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if cm.Data["owner"] == w.replica {
		return reconcile.Result{}, nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data["owner"] = w.replica
	err := w.writer.Update(ctx, &cm)
	switch {
	case errors.Is(err, ErrTermEnded) && ctx.Err() == nil, errors.Is(err, ErrStaleTerm):
		w.mu.Lock()
		w.refused = append(w.refused, fmt.Sprintf("%s: %v", req.Name, err))
		w.mu.Unlock()
		return reconcile.Result{RequeueAfter: 50 * time.Millisecond}, nil
	case apierrors.IsConflict(err) || errors.Is(err, ErrTermEnded):
		//lint:ignore SA1019 the rate-limited requeue is what a lagging cache wants
		return reconcile.Result{Requeue: true}, nil // the cache lags, or the shard moved
	}
	return reconcile.Result{}, err
}

func (w *refusalRecorder) refusals() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.refused...)
}

// shardFenceNode is a replica with a single-leader election (LeaderElectionID) and
// ServerSideFence serverSide, writing as user (impersonated; "" the test's own user).
func shardFenceNode(t *testing.T, identity, ns, user string, serverSide bool) *node {
	t.Helper()
	cfg := shared.Config()
	if user != "" {
		cfg.Impersonate.UserName, cfg.Impersonate.Groups = user, []string{"system:masters"}
	}
	mgr, err := manager.New(cfg, manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{mgr: mgr, registry: prometheus.NewRegistry(), done: make(chan error, 1)}
	n.rt, err = New(mgr, Options{
		LeaderElectionID: "single", LeaderElectionNamespace: ns, Identity: identity,
		LeaseDuration: &testLease, RenewDeadline: &testRenew, RetryPeriod: &testRetry,
		Clientset: shared.Clientset(), MetricsRegisterer: n.registry, ServerSideFence: serverSide,
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestShardWritesBesideASingleLeader: replicas that run the single-leader election
// (LeaderElectionID) beside a sharded controller write the objects of their shards,
// each under its shard's term, whether or not they hold the single-leader Lease: the
// fence reads the shard's Lease for a shard's term, never the single leader's (which
// only one replica holds), before it overwrites a stamp of no term (half the objects
// created once the shards are balanced, as after a restore from another cluster) and,
// with ServerSideFence, for the Lease token. With both API server fences installed
// (the single leader's and the ring's), the shard writes pass them, stamped with the
// name and token of their shard's Lease.
func TestShardWritesBesideASingleLeader(t *testing.T) {
	for _, tc := range []struct {
		name               string
		serverSide, fences bool
	}{
		{"ServerSideFence=false", false, false},
		{"ServerSideFence=true", true, false},
		{"ServerSideFence=true,both fences installed", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) { testShardWritesBesideASingleLeader(t, tc.serverSide, tc.fences) })
	}
}

func testShardWritesBesideASingleLeader(t *testing.T, serverSide, fences bool) {
	const (
		objects  = 24
		shards   = 4
		replicas = 2
	)
	ctx := context.Background()
	raw := newClient(t)
	ns := newNamespace(t, raw)
	for i := range objects {
		if err := raw.Create(ctx, configMap(ns, fmt.Sprint("cm-", i))); err != nil {
			t.Fatal(err)
		}
	}
	user := ""
	if fences {
		user = fenceWriter
		installBothFences(t, raw, ns, shards)
	}
	nodes := make([]*node, replicas)
	handles := make([]*Sharded, replicas)
	writers := make([]*refusalRecorder, replicas)
	for i := range nodes {
		id := fmt.Sprint("r", i)
		n := shardFenceNode(t, id, ns, user, serverSide)
		writers[i] = &refusalRecorder{replica: id, reader: n.mgr.GetCache(), writer: n.rt.FencedClient(nil)}
		h, err := n.rt.AddShardedController(ShardedController{
			Name: "writer", Reconciler: writers[i], For: &corev1.ConfigMap{},
			Sharding: sharding.Config{Namespace: ns, Shards: shards,
				LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry},
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i], handles[i] = n, h
	}
	for _, n := range nodes {
		n.start(t)
	}
	ring, _ := sharding.NewRing(shards)
	total := objects
	writtenByOwners := func() bool {
		owner := map[int]string{}
		for i, h := range handles {
			for _, st := range h.Sharder().Owned() {
				owner[st.Shard] = fmt.Sprint("r", i)
			}
		}
		if len(owner) != shards {
			return false
		}
		var list corev1.ConfigMapList
		if err := raw.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, cm := range list.Items {
			shard := ring.ShardOf(string(cm.UID))
			if cm.Data["owner"] != owner[shard] {
				return false
			}
			if fences && !shardTokenOf(t, ns, "writer", shard).carried(&cm) {
				return false
			}
		}
		return len(list.Items) == total
	}
	refused := func() bool {
		for _, w := range writers {
			if len(w.refusals()) > 0 {
				return true
			}
		}
		return false
	}
	written := func(what string) {
		t.Helper()
		batontest.WaitFor(t, 30*time.Second, what+", or a write of a live shard term refused", func() bool {
			if refused() {
				return true
			}
			for _, h := range handles {
				if len(h.Sharder().Owned()) != shards/replicas {
					return false // balanced: one of the replicas does not lead the single Lease
				}
			}
			return writtenByOwners()
		})
	}
	written("every ConfigMap written by its shard's owner")
	// Objects stamped with a term of no term of their shard's Lease, created until
	// each replica leads the shards of two of them: each owner overwrites the stamp.
	stamped := map[string]int{}
	for i := 0; !refused() && (stamped["r0"] < 2 || stamped["r1"] < 2); i++ {
		cm := configMap(ns, fmt.Sprint("restored-", i))
		cm.Annotations = map[string]string{TermAnnotation: "18446744073709551615"}
		if err := raw.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		total++
		for r, h := range handles {
			for _, st := range h.Sharder().Owned() {
				if st.Shard == ring.ShardOf(string(cm.UID)) {
					stamped[fmt.Sprint("r", r)]++
				}
			}
		}
	}
	written("every ConfigMap stamped with a term of no term overwritten by its shard's owner")
	if !refused() && !writtenByOwners() {
		t.Error("the ConfigMaps are no longer all written by their shard's owners")
	}
	leaders := 0
	for i, n := range nodes {
		if n.rt.IsLeader() {
			leaders++
		}
		if r := writers[i].refusals(); len(r) > 0 {
			t.Errorf("r%d (single leader %v): %d writes of a running shard term refused, first %s", i, n.rt.IsLeader(), len(r), r[0])
		}
	}
	if leaders != 1 {
		t.Errorf("%d replicas lead the single-leader Lease, want 1", leaders)
	}
}

// installBothFences installs, for fenceWriter's ConfigMaps in ns, the single leader's
// fence on the Lease "single" and the ring "writer"'s fence on its shard Leases, with
// those Leases created released, and waits until both are in force: each refuses a
// write with a token of nobody.
func installBothFences(t *testing.T, raw client.Client, ns string, shards int) {
	t.Helper()
	cfg := shared.Config()
	cfg.Impersonate.UserName, cfg.Impersonate.Groups = fenceWriter, []string{"system:masters"}
	writer, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Released Leases (no holder), for the policies' parameters before the elections:
	// while a parameter is missing its binding refuses every write, and the API server
	// names one refusing policy only.
	leases := shared.Clientset().CoordinationV1().Leases(ns)
	for _, name := range append([]string{"single"}, shardLeaseNames("writer", shards)...) {
		if _, err := leases.Create(context.Background(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// refusedBy reports whether policy refuses a write stamped with s.
	refusedBy := func(policy string, s stamps) bool {
		cm := configMap(ns, "probe")
		s.stamp(cm)
		err := writer.Create(context.Background(), cm, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "'"+policy+"'")
	}
	onlyNS := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	configMaps := []schema.GroupResource{{Resource: "configmaps"}}
	ringPolicies, ringBindings, err := NewShardedAdmissionFence(ShardedAdmissionFence{Name: "baton-shard-fence-" + ns, Ring: "writer",
		Namespace: ns, Shards: shards, Users: []string{fenceWriter}, Resources: configMaps, NamespaceSelector: onlyNS})
	if err != nil {
		t.Fatal(err)
	}
	installShardFence(t, raw, ringPolicies, ringBindings)
	waitForPolicy(t, func() bool {
		return refusedBy(ringPolicies[0].Name, stamps{ShardLeaseAnnotation: sharding.ShardLeaseName("writer", 0), ShardFenceLabel: sharding.ShardLeaseName("writer", 0), ShardHolderAnnotation: "nobody",
			ShardAcquiredAnnotation: "2000-01-01T00:00:00.000000Z"})
	})
	single, singleBinding, err := NewAdmissionFence(AdmissionFence{Name: "baton-fence-" + ns, LeaseName: "single", LeaseNamespace: ns,
		Users: []string{fenceWriter}, Resources: configMaps, NamespaceSelector: onlyNS})
	if err != nil {
		t.Fatal(err)
	}
	installFence(t, raw, single, []client.Object{singleBinding})
	waitForPolicy(t, func() bool {
		return refusedBy(single.Name, stamps{HolderAnnotation: "nobody", AcquiredAnnotation: "2000-01-01T00:00:00.000000Z", FenceLabel: "single"})
	})
}

// shardLeaseNames returns the names of ring's shard Leases.
func shardLeaseNames(ring string, shards int) []string {
	names := make([]string, shards)
	for i := range names {
		names[i] = sharding.ShardLeaseName(ring, i)
	}
	return names
}

// shardTokenOf returns the stamps of the current term of shard's Lease of ring in ns.
func shardTokenOf(t *testing.T, ns, ring string, shard int) stamps {
	t.Helper()
	name := sharding.ShardLeaseName(ring, shard)
	l, err := shared.Clientset().CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil || l.Spec.AcquireTime == nil {
		return stamps{ShardLeaseAnnotation: name, ShardFenceLabel: name, ShardHolderAnnotation: "(no holder)"}
	}
	return stamps{ShardLeaseAnnotation: name, ShardFenceLabel: name, ShardHolderAnnotation: *l.Spec.HolderIdentity,
		ShardAcquiredAnnotation: formatMicro(*l.Spec.AcquireTime)}
}
