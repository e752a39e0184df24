package node

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/google/uuid"

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
// and back to 2 kills(t) times; at 5 replicas, kills(t) replicas' containers
// SIGKILLed one after another (each a different pod while there are, so the
// kubelet's restart back-off does not apply); then at 2 replicas a rolling update. After each,
// the shares are balanced (they differ by at most one shard), every object is
// stamped by its shard's owner, and no shard Lease ever had two holders in one
// term. The replicas run with the example's default identity.
func TestShardedExample(t *testing.T) {
	c := node(t)
	c.deleteNamespace(t, shardNS)
	t.Cleanup(func() { c.deleteSharded(t) })
	c.applySharded(t)
	ring := c.watchRing(t)
	c.awaitBalanced(t, 3, "3 replicas")
	var up, upMoves, down, downMoves stats
	for range kills(t) {
		b, m := c.scaleTimed(t, ring, 5)
		up, upMoves = append(up, b), append(upMoves, m)
		b, m = c.scaleTimed(t, ring, 2)
		down, downMoves = append(down, b), append(downMoves, m)
	}
	figure(t, "sharded: scale to 5 (from 3, then from 2) -> the last shard moved", upMoves)
	figure(t, "sharded: scale to 5 (from 3, then from 2) -> balanced, every object stamped by its owner", up)
	figure(t, "sharded: scale 5 -> 2 -> the last shard moved", downMoves)
	figure(t, "sharded: scale 5 -> 2 -> balanced, every object stamped by its owner, the old pods gone", down)
	c.scaleTimed(t, ring, 5)
	var moved, rebalanced stats
	killed := map[string]bool{}
	for range kills(t) {
		// As in TestSIGKILLLeader: the replica restarted by the last kill, which
		// placement may give the victim's shards, has seen them renewed on its
		// watch (a shard Lease first seen on a list is not taken on a death).
		time.Sleep(settle)
		m, d := c.killShardOwner(t, ring, killed)
		moved, rebalanced = append(moved, m...), append(rebalanced, d)
	}
	figure(t, "sharded: SIGKILL of a replica (5 replicas) -> each of its shards in a new term", moved)
	figure(t, "sharded: SIGKILL -> balanced again (the container restarted and rejoined)", rebalanced)
	c.scaleTimed(t, ring, 2)
	at := time.Now()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"node-e2e/rollout":"%d"}}}}}`, at.UnixNano())
	if _, err := c.cs.AppsV1().Deployments(shardNS).Patch(context.Background(), "sharded", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the rollout starts
	d := c.awaitBalanced(t, 2, "rolling update").Sub(at)
	figure(t, "sharded: rolling update -> balanced and every object stamped by its owner", stats{d})
	ring.check(t)
	for _, p := range c.shardedPods(t) {
		c.noForbidden(t, p.Name, "sharded")
	}
}

// noForbidden fails the test for each line of the container's log that says the
// API server refused a request for want of RBAC: the example's ClusterRole must
// grant all the replica does, its Events included.
func (c *cluster) noForbidden(t *testing.T, pod, container string) {
	t.Helper()
	raw, err := c.cs.CoreV1().Pods(shardNS).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(context.Background())
	if err != nil {
		t.Errorf("the log of %s: %v", pod, err)
		return
	}
	for line := range strings.Lines(string(raw)) {
		if strings.Contains(line, "is forbidden") {
			t.Errorf("%s: a request refused by RBAC: %s", pod, strings.TrimSpace(line))
		}
	}
}

// scaleTimed scales the example to n replicas and returns how long until the
// ring was balanced over them (awaitBalanced: the pods of a scale-down gone
// too), and until the last shard Lease that changed hands meanwhile did.
func (c *cluster) scaleTimed(t *testing.T, ring *ringLog, n int32) (balanced, lastMove time.Duration) {
	t.Helper()
	at := time.Now()
	c.scaleSharded(t, n)
	balanced = c.awaitBalanced(t, int(n), fmt.Sprintf("scaled to %d", n)).Sub(at)
	return balanced, ring.lastMoveAfter(at).Sub(at)
}

// killShardOwner SIGKILLs the container of a replica that owns shards, in a
// pod not in killed (which it adds to), and returns how soon each of its
// shards had a new term, and how soon the ring was balanced again (the
// container restarts in place and rejoins under a new identity).
func (c *cluster) killShardOwner(t *testing.T, ring *ringLog, killed map[string]bool) (moved stats, rebalanced time.Duration) {
	t.Helper()
	owners := ring.owners()
	leases := slices.Sorted(maps.Keys(owners))
	var victim string
	for _, lease := range leases {
		if h := owners[lease].Holder; victim == "" && !killed[podOf(h)] {
			victim = h
		}
	}
	if victim == "" { // more kills than pods: the kubelet's back-off may apply
		victim = owners[leases[0]].Holder
	}
	var owned []string
	for _, lease := range leases {
		if owners[lease].Holder == victim {
			owned = append(owned, lease)
		}
	}
	killed[podOf(victim)] = true
	p, err := c.cs.CoreV1().Pods(shardNS).Get(context.Background(), podOf(victim), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replicas := len(c.shardedPods(t))
	at := c.sigkill(t, runningID(p, "sharded"))
	var each []string
	for _, lease := range owned {
		s := ring.await(t, lease, owners[lease])
		moved = append(moved, s.Seen.Sub(at))
		each = append(each, fmt.Sprintf("%s to %s after %s", lease, s.Holder, ms(s.Seen.Sub(at))))
	}
	if slices.Max(moved) > 5*time.Second {
		t.Logf("sharded: a slow kill at %s: %s", at.UTC().Format("15:04:05.000"), strings.Join(each, ", "))
		for _, p := range c.shardedPods(t) {
			c.logDeathLines(t, shardNS, p.Name, "sharded")
		}
	}
	rebalanced = c.awaitBalanced(t, replicas, "after the kill").Sub(at)
	t.Logf("sharded: SIGKILL of %s: its %d shards in new terms after %s (max), balanced again after %s",
		victim, len(owned), ms(slices.Max(moved)), ms(rebalanced))
	return moved, rebalanced
}

// shardedPods lists the example's pods.
func (c *cluster) shardedPods(t *testing.T) []corev1.Pod {
	t.Helper()
	pods, err := c.cs.CoreV1().Pods(shardNS).List(context.Background(), metav1.ListOptions{LabelSelector: "app=sharded"})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// deleteSharded deletes what applySharded made: the namespace (its pods, the
// ring's Leases and the objects) and the cluster-scoped RBAC.
func (c *cluster) deleteSharded(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, err := range []error{
		c.cs.RbacV1().ClusterRoleBindings().Delete(ctx, shardedRBAC, metav1.DeleteOptions{}),
		c.cs.RbacV1().ClusterRoles().Delete(ctx, shardedRBAC, metav1.DeleteOptions{}),
	} {
		if err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}
	c.deleteNamespace(t, shardNS)
}

// shardedRBAC names the example's ClusterRole and ClusterRoleBinding.
const shardedRBAC = "node-e2e-sharded"

// applySharded creates the namespace, the example's RBAC (its manager caches
// ConfigMaps cluster-wide, so a ClusterRole), the Deployment and the objects.
func (c *cluster) applySharded(t *testing.T) {
	t.Helper()
	c.apply(t, []runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shardNS}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sharded", Namespace: shardNS}},
	})
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: shardedRBAC}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"get", "list", "watch", "create", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		// The shard Leases' Events: the manager's recorder writes events.k8s.io, a
		// client-go recorder the core group.
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: shardedRBAC},
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
						// The default identity: the pod's hostname (its name) and a UUID.
						Args:            []string{"--lease-namespace=" + shardNS, fmt.Sprintf("--shards=%d", shardCount)},
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
	identity := map[string]string{} // pod -> the identity its shards are held by
	for i := range shardCount {
		h := owner[sharding.ShardLeaseName(ringName, i)]
		pod := podOf(h)
		if _, ok := live[pod]; !ok || pod == h {
			return fmt.Sprintf("shard %d held by %q, not the default identity of a live replica", i, h)
		}
		if id, ok := identity[pod]; ok && id != h {
			return fmt.Sprintf("pod %s holds shards under two identities, %q and %q (a dead run's not yet taken over)", pod, id, h)
		}
		identity[pod] = h
		live[pod]++
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

// podOf is the pod whose replica has the default identity holder (the pod's
// hostname, its name, then "-" and a UUID); holder itself when it is not of
// that form.
func podOf(holder string) string {
	const n = 36 // a UUID's length
	if len(holder) <= n+1 || holder[len(holder)-n-1] != '-' {
		return holder
	}
	if _, err := uuid.Parse(holder[len(holder)-n:]); err != nil {
		return holder
	}
	return holder[:len(holder)-n-1]
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

// lastMoveAfter is when the last shard Lease that changed hands after at was
// first seen held by its new holder (at itself when none did).
func (r *ringLog) lastMoveAfter(at time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := at
	for _, h := range r.leases {
		var held leaseState // the last held state before s
		for _, s := range h {
			if s.Holder == "" {
				continue
			}
			if held.Holder != "" && s.Holder != held.Holder && s.Seen.After(last) {
				last = s.Seen
			}
			held = s
		}
	}
	return last
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
