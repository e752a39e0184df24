package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// The sharded example's deployment in the suite.
const (
	shardNS      = "sharded-e2e"
	ringName     = "sharded" // examples/sharded's ring
	shardCount   = 30        // shares of 2, 3 and 5 replicas are exact
	objectCount  = 60
	shardedLabel = "baton.dev/sharded" // examples/sharded.Label
)

// TestShardedExample: examples/sharded as a 3-replica Deployment, scaled to 5
// and back to 2, a replica's container SIGKILLed, then a rolling update. After
// each, the shares are balanced (they differ by at most one shard), every
// object is stamped by its shard's owner, and no shard Lease ever had two
// holders in one term.
func TestShardedExample(t *testing.T) {
	c := node(t)
	c.deleteNamespace(t, shardNS)
	c.applySharded(t)
	ring := c.watchRing(t)
	c.awaitBalanced(t, 3, "3 replicas")
	for _, n := range []int32{5, 2} {
		at := time.Now()
		c.scaleSharded(t, n)
		d := c.awaitBalanced(t, int(n), fmt.Sprintf("scaled to %d", n)).Sub(at)
		figure(t, fmt.Sprintf("sharded: scale to %d -> balanced and every object stamped by its owner", n), stats{d})
	}
	c.killShardOwner(t, ring)
	at := time.Now()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"node-e2e/rollout":"%d"}}}}}`, at.UnixNano())
	if _, err := c.cs.AppsV1().Deployments(shardNS).Patch(context.Background(), "sharded", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the rollout starts
	d := c.awaitBalanced(t, 2, "rolling update").Sub(at)
	figure(t, "sharded: rolling update -> balanced and every object stamped by its owner", stats{d})
	ring.check(t)
}

// killShardOwner SIGKILLs the container of a replica that owns shards and
// measures how soon each of its shards has a new term, and how soon the ring
// is balanced again (the container restarts in place and rejoins).
func (c *cluster) killShardOwner(t *testing.T, ring *ringLog) {
	t.Helper()
	owners := ring.owners()
	var victim string
	var owned []string
	for lease, s := range owners {
		if victim == "" {
			victim = s.Holder
		}
		if s.Holder == victim {
			owned = append(owned, lease)
		}
	}
	p, err := c.cs.CoreV1().Pods(shardNS).Get(context.Background(), victim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	at := c.sigkill(t, runningID(p, "sharded"))
	var moved stats
	for _, lease := range owned {
		s := ring.await(t, lease, owners[lease])
		moved = append(moved, s.Seen.Sub(at))
	}
	figure(t, fmt.Sprintf("sharded: SIGKILL of %s -> each of its %d shards in a new term", victim, len(owned)), moved)
	d := c.awaitBalanced(t, 2, "after the kill").Sub(at)
	figure(t, "sharded: SIGKILL -> balanced again (the container restarted and rejoined)", stats{d})
}

// applySharded creates the namespace, the example's RBAC (its manager caches
// ConfigMaps cluster-wide, so a ClusterRole), the Deployment and the objects.
func (c *cluster) applySharded(t *testing.T) {
	t.Helper()
	c.apply(t, []runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shardNS}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sharded", Namespace: shardNS}},
	})
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "node-e2e-sharded"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "node-e2e-sharded"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sharded", Namespace: shardNS}}}
	ctx := context.Background()
	_ = c.cs.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
	_ = c.cs.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
	if _, err := c.cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range objectCount {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("object-%02d", i), Namespace: shardNS,
			Labels: map[string]string{shardedLabel: "true"}}}
		if _, err := c.cs.CoreV1().ConfigMaps(shardNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.cs.AppsV1().Deployments(shardNS).Create(ctx, shardedDeployment(t), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// shardedDeployment runs examples/sharded (image baton-sharded:dev) with the
// shipped Deployment's securityContext and the death signal's environment.
func shardedDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	shipped := shippedDeployment(t).Spec.Template.Spec
	labels := map[string]string{"app": "sharded"}
	replicas := int32(3)
	env := slices.Clone(shipped.Containers[0].Env)
	for i := range env {
		if env[i].Name == "CONTAINER_NAME" {
			env[i].Value = "sharded"
		}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "sharded", Namespace: shardNS},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: shippedDeployment(t).Spec.Strategy,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: "sharded",
					SecurityContext:    shipped.SecurityContext,
					Containers: []corev1.Container{{
						Name:            "sharded",
						Image:           "baton-sharded:dev",
						ImagePullPolicy: corev1.PullIfNotPresent,
						// An explicit identity, valid in a Lease name: the pod's name.
						Args:            []string{"--identity=$(POD_NAME)", "--lease-namespace=" + shardNS, fmt.Sprintf("--shards=%d", shardCount)},
						Env:             env,
						Resources:       shipped.Containers[0].Resources,
						SecurityContext: shipped.Containers[0].SecurityContext,
					}},
				},
			},
		},
	}
}

func (c *cluster) scaleSharded(t *testing.T, n int32) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	if _, err := c.cs.AppsV1().Deployments(shardNS).Patch(context.Background(), "sharded", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// awaitBalanced waits until n replicas run (no other pod of the Deployment
// left), every shard Lease is held by one of them, their shares differ by at
// most one, and every object is stamped by its shard's owner; it returns the
// time that was first seen.
func (c *cluster) awaitBalanced(t *testing.T, n int, what string) time.Time {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	why := ""
	for time.Now().Before(deadline) {
		if why = c.unbalanced(n); why == "" {
			t.Logf("sharded, %s: balanced over %d replicas, every object stamped by its owner", what, n)
			return time.Now()
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("sharded, %s: not balanced within 4m: %s", what, why)
	return time.Time{}
}

// unbalanced says why the ring is not balanced over n replicas ("" when it is).
func (c *cluster) unbalanced(n int) string {
	ctx := context.Background()
	pods, err := c.cs.CoreV1().Pods(shardNS).List(ctx, metav1.ListOptions{LabelSelector: "app=sharded"})
	if err != nil {
		return err.Error()
	}
	live := map[string]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || !ready(&p) {
			return "pod " + p.Name + " not Ready or terminating"
		}
		live[p.Name] = 0
	}
	if len(live) != n {
		return fmt.Sprintf("%d pods", len(live))
	}
	leases, err := c.cs.CoordinationV1().Leases(shardNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	owner := map[string]string{}
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity != nil {
			owner[l.Name] = *l.Spec.HolderIdentity
		}
	}
	for i := range shardCount {
		h := owner[sharding.ShardLeaseName(ringName, i)]
		if _, ok := live[h]; !ok {
			return fmt.Sprintf("shard %d held by %q", i, h)
		}
		live[h]++
	}
	lo, hi := shardCount, 0
	for _, k := range live {
		lo, hi = min(lo, k), max(hi, k)
	}
	if hi-lo > 1 {
		return fmt.Sprintf("shares %v", live)
	}
	return c.unstamped(owner)
}

// unstamped names an object not stamped by its shard's owner ("" when none).
func (c *cluster) unstamped(owner map[string]string) string {
	cms, err := c.cs.CoreV1().ConfigMaps(shardNS).List(context.Background(), metav1.ListOptions{LabelSelector: shardedLabel + "=true"})
	if err != nil {
		return err.Error()
	}
	for _, cm := range cms.Items {
		lease := ringName + "-shard-" + cm.Data["shard"]
		if by := cm.Data["reconciled-by"]; by == "" || by != owner[lease] {
			return fmt.Sprintf("object %s (shard %q) reconciled by %q, the shard is held by %q", cm.Name, cm.Data["shard"], by, owner[lease])
		}
	}
	return ""
}

// ringLog records every version of every Lease of the namespace.
type ringLog struct {
	// mu guards leases and changed.
	mu      sync.Mutex
	leases  map[string][]leaseState
	changed chan struct{}
}

func (c *cluster) watchRing(t *testing.T) *ringLog {
	t.Helper()
	r := &ringLog{leases: map[string][]leaseState{}, changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	w := c.watch(t, ctx, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return c.cs.CoordinationV1().Leases(shardNS).Watch(ctx, opts)
	}, "")
	go func() {
		defer close(done)
		for ev := range w {
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok || ev.Type == watch.Deleted || !strings.Contains(l.Name, "-shard-") {
				continue
			}
			r.mu.Lock()
			r.leases[l.Name] = append(r.leases[l.Name], leaseStateOf(l, time.Now()))
			close(r.changed)
			r.changed = make(chan struct{})
			r.mu.Unlock()
		}
	}()
	return r
}

// owners is each shard Lease's newest state.
func (r *ringLog) owners() map[string]leaseState {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]leaseState{}
	for name, h := range r.leases {
		if s := h[len(h)-1]; s.Holder != "" {
			out[name] = s
		}
	}
	return out
}

// await waits until the shard Lease is held in a term other than from's.
func (r *ringLog) await(t *testing.T, lease string, from leaseState) leaseState {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		r.mu.Lock()
		h, changed := r.leases[lease], r.changed
		r.mu.Unlock()
		if s := h[len(h)-1]; s.Holder != "" && s.term() != from.term() {
			return s
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s: no new term within 1m of its holder's kill", lease)
		}
	}
}

// check fails the test when a shard Lease had two holders in one term.
func (r *ringLog) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	versions := 0
	for name, h := range r.leases {
		checkStates(t, name, h)
		versions += len(h)
	}
	t.Logf("%d versions of %d shard Leases checked: never two holders in a term", versions, len(r.leases))
}
