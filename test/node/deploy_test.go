package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/store"
)

// fenceEnv set to 1 applies deploy/admission-fence.yaml too. Off by default,
// because of an API server defect (kube-apiserver v1.37.2): once the fence's
// policy and the namespace were deleted and created again on the same API
// server, the policy judges by the Lease as it was in the deleted namespace,
// and refuses every write of the live leader (seen for over 6 minutes; the
// leader logs "the Lease is held by" a pod long gone). Only the first test
// that applies the fence after hack/cluster.sh up passes:
// BATON_NODE_FENCE=1 hack/node-e2e.sh -run TestHandovers passes on a fresh
// cluster and fails on the second run. pkg/integration/controllerruntime's
// admission_recreate_test.go (BATON_PROBE_PARAM_CACHE=1) shows the defect on
// envtest.
const fenceEnv = "BATON_NODE_FENCE"

func withFence() bool { return os.Getenv(fenceEnv) == "1" }

// TestDeploy: deploy/ applied as kubectl apply -k would: both replicas run and
// turn Ready under the shipped securityContext, one holds the Lease, /metrics
// answers on the pod's loopback only, the ServiceAccount's RBAC refuses what
// the Role does not grant, and the NetworkPolicy is accepted.
func TestDeploy(t *testing.T) {
	c := node(t)
	c.fresh(t, true, withFence())
	lease := c.watchLease(t, ns, leaseName)
	pods := c.awaitDeployment(t, 2)
	held := lease.await(t, time.Minute, "a holder", func(s leaseState) bool { return s.Holder != "" })
	if held.Holder != pods[0].Name && held.Holder != pods[1].Name {
		t.Errorf("the Lease is held by %s, not one of the pods %s, %s", held.Holder, pods[0].Name, pods[1].Name)
	}
	for _, p := range pods {
		c.checkSecurity(t, p)
		c.checkMetricsLoopbackOnly(t, p)
	}
	c.checkRBAC(t)
	if _, err := c.cs.NetworkingV1().NetworkPolicies(ns).Get(context.Background(), "baton", metav1.GetOptions{}); err != nil {
		t.Errorf("the NetworkPolicy: %v", err)
	}
	// What this node cannot show: Debian's CNI plugins (bridge, host-local)
	// do not enforce NetworkPolicy, so the policy is accepted but not in force.
	t.Log("NetworkPolicy accepted; not enforced by this node's CNI plugins (bridge, host-local)")
}

// awaitDeployment waits until n pods of the Deployment run Ready and returns
// them.
func (c *cluster) awaitDeployment(t *testing.T, n int) []corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	var last []corev1.Pod
	for time.Now().Before(deadline) {
		list, err := c.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=baton"})
		if err != nil {
			t.Fatal(err)
		}
		var readyPods []corev1.Pod
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && ready(&p) {
				readyPods = append(readyPods, p)
			}
		}
		if len(readyPods) == n && len(list.Items) == n {
			return readyPods
		}
		last = list.Items
		time.Sleep(200 * time.Millisecond)
	}
	var why []string
	for i := range last {
		why = append(why, last[i].Name+": "+describe(&last[i]))
	}
	t.Fatalf("not %d Ready pods of the Deployment within 3m: %s", n, strings.Join(why, " | "))
	return nil
}

// checkSecurity reads the container's process on the host: it runs as 65532,
// with no capabilities, no new privileges, a seccomp filter and a read-only
// root filesystem.
func (c *cluster) checkSecurity(t *testing.T, p corev1.Pod) {
	t.Helper()
	pid := c.hostPID(t, runningID(&p, container))
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Uid:\t65532\t65532\t65532\t65532", "CapEff:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(string(status), want+"\n") {
			t.Errorf("%s: /proc/%d/status lacks %q", p.Name, pid, want)
		}
	}
	mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mounts", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 3 && f[1] == "/" && !strings.HasPrefix(f[3], "ro") {
			t.Errorf("%s: its root filesystem is mounted %s, want ro", p.Name, f[3])
		}
	}
}

// checkMetricsLoopbackOnly: the pod's address refuses the metrics port and
// serves the probes; inside the pod's network namespace /metrics answers on
// 127.0.0.1.
func (c *cluster) checkMetricsLoopbackOnly(t *testing.T, p corev1.Pod) {
	t.Helper()
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort(p.Status.PodIP, "8080"), 2*time.Second); err == nil {
		conn.Close()
		t.Errorf("%s: %s:8080 (metrics) accepts connections on the pod's address", p.Name, p.Status.PodIP)
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(p.Status.PodIP, "8081"), 2*time.Second)
	if err != nil {
		t.Errorf("%s: the probe port %s:8081: %v", p.Name, p.Status.PodIP, err)
	} else {
		conn.Close()
	}
	pid := c.hostPID(t, runningID(&p, container))
	out, err := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-n", "curl", "-sf", "http://127.0.0.1:8080/metrics").Output()
	if err != nil || !strings.Contains(string(out), "baton_term") {
		t.Errorf("%s: /metrics on the pod's loopback: %v, %d bytes without baton_term", p.Name, err, len(out))
	}
}

// serviceAccount is a clientset acting as the controller's ServiceAccount.
func (c *cluster) serviceAccount(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(c.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:baton:baton"}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// checkRBAC: what the Role grants is allowed, the rest forbidden.
func (c *cluster) checkRBAC(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	sa := c.serviceAccount(t)
	if _, err := sa.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{}); err != nil {
		t.Errorf("the ServiceAccount cannot get its Lease: %v", err)
	}
	forbidden := map[string]error{}
	_, forbidden["list secrets"] = sa.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	_, forbidden["get the configuration ConfigMap (list and watch only)"] = sa.CoreV1().ConfigMaps(ns).Get(ctx, "baton-config", metav1.GetOptions{})
	_, forbidden["list pods in kube-system"] = sa.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
	forbidden["delete its Lease"] = sa.CoordinationV1().Leases(ns).Delete(ctx, leaseName, metav1.DeleteOptions{})
	_, forbidden["create pods"] = sa.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	for call, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("the ServiceAccount may %s: %v, want Forbidden", call, err)
		}
	}
}

// stamp is one version of the published ConfigMap: the term and writer
// annotations its writes carry.
type stamp struct {
	term    uint64
	by      string
	version string
}

// stampLog records the published ConfigMap's versions from a watch.
type stampLog struct {
	// mu guards stamps.
	mu     sync.Mutex
	stamps []stamp
}

func (c *cluster) watchStamps(t *testing.T) *stampLog {
	t.Helper()
	l := &stampLog{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	w := c.watch(t, ctx, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return c.cs.CoreV1().ConfigMaps(ns).Watch(ctx, opts)
	}, published)
	go func() {
		defer close(done)
		for ev := range w {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			term, _ := strconv.ParseUint(cm.Annotations[configpublisher.AnnotationTerm], 10, 64)
			l.mu.Lock()
			l.stamps = append(l.stamps, stamp{term, cm.Annotations[configpublisher.AnnotationPublishedBy], cm.ResourceVersion})
			l.mu.Unlock()
		}
	}()
	return l
}

// check fails the test when a version of the published object carries a
// term below an earlier version's (a write of an old term accepted), when
// one term has two writers, or when a writer never held the Lease.
func (l *stampLog) check(t *testing.T, holders map[string]bool) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	writer := map[uint64]string{}
	var top uint64
	for _, s := range l.stamps {
		if s.term < top {
			t.Errorf("the published object went from term %d back to term %d (by %s) at version %s", top, s.term, s.by, s.version)
		}
		top = max(top, s.term)
		if w, ok := writer[s.term]; ok && w != s.by {
			t.Errorf("term %d written by both %s and %s", s.term, w, s.by)
		}
		writer[s.term] = s.by
		if !holders[s.by] {
			t.Errorf("term %d written by %s, which never held the Lease", s.term, s.by)
		}
	}
	return len(writer)
}

// TestHandovers: the leader's pod deleted gracefully (SIGTERM: it releases the
// Lease), then rolling updates of the Deployment, kills(t) of each; every
// handover is timed, the Lease's history never has two holders in a term, and
// the published object's term stamps never go back.
func TestHandovers(t *testing.T) {
	c := node(t)
	c.fresh(t, true, withFence())
	lease := c.watchLease(t, ns, leaseName)
	stamps := c.watchStamps(t)
	c.awaitDeployment(t, 2)
	lease.await(t, time.Minute, "a holder", func(s leaseState) bool { return s.Holder != "" })
	var deletes stats
	for i := range kills(t) {
		cur, _, _ := lease.last()
		zero := time.Now()
		if err := c.cs.CoreV1().Pods(ns).Delete(context.Background(), cur.Holder, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		next := lease.await(t, time.Minute, "the next term", func(s leaseState) bool { return s.Holder != "" && s.term() != cur.term() })
		deletes = append(deletes, next.Seen.Sub(zero))
		t.Logf("delete %d: %s deleted; %s's term started %s after the DELETE was sent", i, cur.Holder, next.Holder, ms(next.Seen.Sub(zero)))
		c.awaitDeployment(t, 2)
	}
	figure(t, "graceful delete -> next term", deletes)
	var rolls stats
	for range kills(t) {
		rolls = append(rolls, c.rollingUpdate(t, lease)...)
	}
	figure(t, "rolling update handovers", rolls)
	holders := map[string]bool{}
	for _, s := range lease.checkHistory(t) {
		holders[s.Holder] = true
	}
	terms := stamps.check(t, holders)
	t.Logf("%d terms published, each by its Lease holder, never going back", terms)
	c.staleWriteRefused(t)
}

// rollingUpdate changes the Deployment's template and times each handover:
// from the moment the holder's pod is marked for deletion to the next term.
func (c *cluster) rollingUpdate(t *testing.T, lease *leaseLog) stats {
	t.Helper()
	ctx := context.Background()
	before, _, _ := lease.last()
	deleting := c.watchDeletions(t)
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"node-e2e/rollout":"%d"}}}}}`, time.Now().UnixNano())
	if _, err := c.cs.AppsV1().Deployments(ns).Patch(ctx, "baton", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	c.awaitRollout(t)
	var out stats
	var prev leaseState // the last held state before s
	for _, s := range lease.history() {
		if s.Holder == "" {
			continue // the release of a graceful stop
		}
		newTerm := prev.Holder != "" && prev.term() != s.term()
		last := prev
		prev = s
		if !newTerm || !s.Seen.After(before.Seen) {
			continue
		}
		if at, ok := deleting.at(last.Holder); ok {
			out = append(out, s.Seen.Sub(at))
			t.Logf("rolling update: %s marked for deletion; %s's term started %s later", last.Holder, s.Holder, ms(s.Seen.Sub(at)))
		}
	}
	if len(out) == 0 {
		t.Error("the rolling update made no handover")
	}
	return out
}

// awaitRollout waits until the Deployment's pods are all of the new template
// and Ready, and the old ones gone.
func (c *cluster) awaitRollout(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		d, err := c.cs.AppsV1().Deployments(ns).Get(context.Background(), "baton", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := d.Status
		if s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == 2 && s.Replicas == 2 && s.AvailableReplicas == 2 {
			c.awaitDeployment(t, 2)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("the rolling update did not finish within 3m")
}

// deletions records when each pod of the namespace was first seen marked
// for deletion.
type deletions struct {
	// mu guards seen.
	mu   sync.Mutex
	seen map[string]time.Time
}

func (d *deletions) at(pod string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.seen[pod]
	return at, ok
}

func (c *cluster) watchDeletions(t *testing.T) *deletions {
	t.Helper()
	d := &deletions{seen: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.DeletionTimestamp == nil {
				continue
			}
			d.mu.Lock()
			if _, ok := d.seen[p.Name]; !ok {
				d.seen[p.Name] = time.Now()
			}
			d.mu.Unlock()
		}
	}()
	return d
}

// staleWriteRefused: a write of the published object stamped with a term
// below the object's is refused, even with the controller's credentials.
func (c *cluster) staleWriteRefused(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	s, err := store.NewConfigMap(c.serviceAccount(t), ns, published)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := s.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := configpublisher.Decode(cur)
	if err != nil || p.Term < 2 {
		t.Fatalf("the published object: term %d, %v", p.Term, err)
	}
	_, err = configpublisher.Write(ctx, s, configpublisher.Record{Term: p.Term - 1, Identity: "stale", Status: configpublisher.StatusValid,
		Content: &configpublisher.Payload{Data: map[string]string{"stale": "an old term"}, ConfigVersion: p.ConfigVersion}})
	if !errors.Is(err, configpublisher.ErrStaleTerm) {
		t.Errorf("a write with the old term %d: %v, want ErrStaleTerm", p.Term-1, err)
	}
}
