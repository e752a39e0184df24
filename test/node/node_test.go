package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/baton-dev/baton/pkg/k8s/incarnation"
	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// Environment of the suite.
const (
	// enableEnv must be 1 for the suite to run; without it every test skips.
	enableEnv = "BATON_NODE_E2E"
	// kubeconfigEnv names the cluster's admin kubeconfig (default $KUBECONFIG).
	kubeconfigEnv = "BATON_NODE_KUBECONFIG"
	// stateEnv is containerd's state directory on the node (hack/cluster.sh's
	// by default), where each running container's init.pid is.
	stateEnv     = "BATON_NODE_CONTAINERD_STATE"
	defaultState = "/run/baton-cluster/containerd/state"
	// killsEnv sets how many times each timed step runs (default 5): the kills,
	// the graceful deletes, the rolling updates, the sharded scales and kills.
	killsEnv = "BATON_NODE_KILLS"
)

// cluster is the node the suite runs on.
type cluster struct {
	cfg   *rest.Config
	cs    kubernetes.Interface
	state string // containerd's state directory
}

// node returns the cluster, or skips the test when the suite is not enabled.
func node(t *testing.T) *cluster {
	t.Helper()
	if os.Getenv(enableEnv) != "1" {
		t.Skipf("the node end-to-end suite runs on a real node only: hack/node-e2e.sh (or %s=1 and %s)", enableEnv, kubeconfigEnv)
	}
	path := os.Getenv(kubeconfigEnv)
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	if path == "" {
		t.Fatalf("%s=1 but neither %s nor KUBECONFIG names a kubeconfig", enableEnv, kubeconfigEnv)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	state := os.Getenv(stateEnv)
	if state == "" {
		state = defaultState
	}
	return &cluster{cfg: cfg, cs: cs, state: state}
}

// kills is how many kills each SIGKILL test makes.
func kills(t *testing.T) int {
	n := 5
	if s := os.Getenv(killsEnv); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("%s=%q: want a positive count", killsEnv, s)
		}
		n = v
	}
	return n
}

// hostPID is the host's pid of the container's first process, read from the
// runc shim's init.pid in containerd's state directory.
func (c *cluster) hostPID(t *testing.T, containerID string) int {
	t.Helper()
	id := strings.TrimPrefix(containerID, "containerd://")
	b, err := os.ReadFile(filepath.Join(c.state, "io.containerd.runtime.v2.task", "k8s.io", id, "init.pid"))
	if err != nil {
		t.Fatalf("the container %s's pid (is %s containerd's state directory? set %s): %v", id, c.state, stateEnv, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// gone returns a channel closed when pid no longer exists, polling every
// 2ms; the time it was first seen gone is sent before the close.
func gone(ctx context.Context, pid int) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		defer close(ch)
		for ctx.Err() == nil {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			// A zombie (state Z) is dead: the shim reaps it soon after.
			if err != nil || strings.Contains(string(b), ") Z ") {
				ch <- time.Now()
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return ch
}

// sigkill kills the container's process from the host and returns the time
// just before the kill.
func (c *cluster) sigkill(t *testing.T, containerID string) time.Time {
	t.Helper()
	pid := c.hostPID(t, containerID)
	at := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}
	return at
}

// leaseState is one observed version of a Lease.
type leaseState struct {
	Holder      string
	Acquired    time.Time
	Transitions int32
	Incarnation string
	Version     string
	Seen        time.Time
}

// term is the identity of a term in the Lease: its holder and acquire time.
func (s leaseState) term() string {
	return s.Holder + "@" + s.Acquired.Format(time.RFC3339Nano)
}

func leaseStateOf(l *coordinationv1.Lease, seen time.Time) leaseState {
	s := leaseState{Version: l.ResourceVersion, Seen: seen, Incarnation: l.Annotations[leaderelection.IncarnationAnnotation]}
	if l.Spec.HolderIdentity != nil {
		s.Holder = *l.Spec.HolderIdentity
	}
	if l.Spec.AcquireTime != nil {
		s.Acquired = l.Spec.AcquireTime.Time
	}
	if l.Spec.LeaseTransitions != nil {
		s.Transitions = *l.Spec.LeaseTransitions
	}
	return s
}

// leaseLog records every version of a Lease from a watch, for the whole test,
// and checks its history: never two holders in one term.
type leaseLog struct {
	ns, name string

	// mu guards states and changed.
	mu      sync.Mutex
	states  []leaseState
	changed chan struct{} // closed and replaced on each new state
}

// watchLease starts a leaseLog of the Lease; it stops with the test.
func (c *cluster) watchLease(t *testing.T, ns, name string) *leaseLog {
	t.Helper()
	l := &leaseLog{ns: ns, name: name, changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	w := c.watch(t, ctx, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return c.cs.CoordinationV1().Leases(ns).Watch(ctx, opts)
	}, name)
	go func() {
		defer close(done)
		for ev := range w {
			if lease, ok := ev.Object.(*coordinationv1.Lease); ok && ev.Type != watch.Deleted {
				l.add(leaseStateOf(lease, time.Now()))
			}
		}
	}()
	return l
}

func (l *leaseLog) add(s leaseState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.states); n > 0 && l.states[n-1].Version == s.Version {
		return
	}
	l.states = append(l.states, s)
	close(l.changed)
	l.changed = make(chan struct{})
}

// last returns the newest state, and a channel closed when a newer one comes.
func (l *leaseLog) last() (leaseState, bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.states) == 0 {
		return leaseState{}, false, l.changed
	}
	return l.states[len(l.states)-1], true, l.changed
}

// await waits until cond holds for the newest state and returns it.
func (l *leaseLog) await(t *testing.T, timeout time.Duration, what string, cond func(leaseState) bool) leaseState {
	t.Helper()
	deadline := time.After(timeout)
	for {
		s, ok, changed := l.last()
		if ok && cond(s) {
			return s
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("Lease %s/%s: %s: not within %v; newest %+v", l.ns, l.name, what, timeout, s)
		}
	}
}

// history returns the states recorded so far.
func (l *leaseLog) history() []leaseState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.states)
}

// checkHistory fails the test when the recorded history has a term with two
// holders or a transition count that went back; it returns the history.
func (l *leaseLog) checkHistory(t *testing.T) []leaseState {
	t.Helper()
	h := l.history()
	checkStates(t, l.ns+"/"+l.name, h)
	return h
}

// checkStates fails the test when a Lease's observed states have two holders
// under one leaseTransitions value, or a leaseTransitions that went back.
func checkStates(t *testing.T, lease string, h []leaseState) {
	t.Helper()
	holderOf := map[int32]string{}
	var prev int32 = -1
	for _, s := range h {
		if s.Holder == "" {
			continue // released
		}
		if s.Transitions < prev {
			t.Errorf("Lease %s: leaseTransitions went back from %d to %d at version %s", lease, prev, s.Transitions, s.Version)
		}
		prev = s.Transitions
		if h, ok := holderOf[s.Transitions]; ok && h != s.Holder {
			t.Errorf("Lease %s: transition %d has two holders, %s and %s", lease, s.Transitions, h, s.Holder)
		}
		holderOf[s.Transitions] = s.Holder
	}
}

// watch lists and watches the one object name (every object for "") with
// watchFn, restarting the watch when the server ends it, until ctx ends; the
// events come on the channel, which is closed after ctx ended.
func (c *cluster) watch(t *testing.T, ctx context.Context, watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), name string) <-chan watch.Event {
	t.Helper()
	out := make(chan watch.Event, 64)
	sel := ""
	if name != "" {
		sel = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	go func() {
		defer close(out)
		rv := ""
		for ctx.Err() == nil {
			w, err := watchFn(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				rv = "" // too old, or the server restarting: start over
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				if m, err := metaOf(ev.Object); err == nil {
					rv = m.GetResourceVersion()
				}
				if ev.Type == watch.Bookmark {
					continue
				}
				if ev.Type == watch.Error {
					rv = ""
					break
				}
				select {
				case out <- ev:
				case <-ctx.Done():
				}
			}
			w.Stop()
		}
	}()
	return out
}

func metaOf(o any) (metav1.Object, error) {
	m, ok := o.(metav1.Object)
	if !ok {
		return nil, errors.New("no object metadata")
	}
	return m, nil
}

// podLog records every version of one pod from a watch.
type podLog struct {
	// mu guards pods and changed.
	mu      sync.Mutex
	pods    []*corev1.Pod
	seen    []time.Time
	changed chan struct{}
}

// watchPod starts a podLog of the pod; it stops with the test.
func (c *cluster) watchPod(t *testing.T, ns, name string) *podLog {
	t.Helper()
	p := &podLog{changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	w := c.watch(t, ctx, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return c.cs.CoreV1().Pods(ns).Watch(ctx, opts)
	}, name)
	go func() {
		defer close(done)
		for ev := range w {
			if pod, ok := ev.Object.(*corev1.Pod); ok {
				p.mu.Lock()
				p.pods, p.seen = append(p.pods, pod), append(p.seen, time.Now())
				close(p.changed)
				p.changed = make(chan struct{})
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// await waits for the first version of the pod, from the start of the log on,
// for which cond holds, and returns it with the time it was seen.
func (p *podLog) await(t *testing.T, timeout time.Duration, what string, cond func(*corev1.Pod) bool) (*corev1.Pod, time.Time) {
	t.Helper()
	deadline := time.After(timeout)
	next := 0
	for {
		p.mu.Lock()
		pods, seen, changed := p.pods[next:], p.seen[next:], p.changed
		p.mu.Unlock()
		for i, pod := range pods {
			if cond(pod) {
				return pod, seen[i]
			}
		}
		next += len(pods)
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s: not within %v", what, timeout)
		}
	}
}

// terminatedRun is the terminated state the kubelet reports for the container
// run containerID, from the pod's state or lastState; nil when not reported.
func terminatedRun(pod *corev1.Pod, container, containerID string) *corev1.ContainerStateTerminated {
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name != container {
			continue
		}
		for _, s := range []corev1.ContainerState{st.State, st.LastTerminationState} {
			if s.Terminated != nil && s.Terminated.ContainerID == containerID {
				return s.Terminated
			}
		}
	}
	return nil
}

// runningID is the container's running container ID ("" when not running).
func runningID(pod *corev1.Pod, container string) string {
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == container && st.State.Running != nil {
			return st.ContainerID
		}
	}
	return ""
}

// ready reports the pod Ready.
func ready(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nonceOf is the nonce of the incarnation a Lease names ("" when none). The
// annotation is the write's acquire time, its renew time and the incarnation,
// separated by spaces (the incarnation has none).
func nonceOf(s leaseState) string {
	fields := strings.Fields(s.Incarnation)
	if len(fields) != 3 {
		return ""
	}
	inc, err := incarnation.Parse(fields[2])
	if err != nil {
		return ""
	}
	return inc.Nonce
}

// deleteNamespace deletes ns and waits until it is gone.
func (c *cluster) deleteNamespace(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	err := c.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if _, err := c.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("namespace %s not gone after 3m", ns)
}

// stats is a set of durations, printed as their median and maximum.
type stats []time.Duration

func (s stats) String() string {
	if len(s) == 0 {
		return "none"
	}
	d := slices.Clone(s)
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	med := d[len(d)/2]
	if len(d)%2 == 0 {
		med = (d[len(d)/2-1] + d[len(d)/2]) / 2
	}
	all := make([]string, len(s))
	for i, v := range s {
		all[i] = ms(v)
	}
	return fmt.Sprintf("median %s, max %s (n=%d: %s)", ms(med), ms(d[len(d)-1]), len(d), strings.Join(all, " "))
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

// figure logs a measured figure in a form hack/node-e2e.sh collects.
func figure(t *testing.T, name string, s stats) {
	t.Helper()
	t.Logf("FIGURE %s: %s", name, s)
}
