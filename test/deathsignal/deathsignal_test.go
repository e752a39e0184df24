package deathsignal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/incarnation"
	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

var shared *batontest.Env

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain()) // a re-executed test binary: the leader process
	}
	goleak.VerifyTestMain(sharedEnvMain{m}, goleak.IgnoreCurrent())
}

// sharedEnvMain runs the tests against one API server, stopped before goleak looks.
type sharedEnvMain struct{ m *testing.M }

func (s sharedEnvMain) Run() int {
	env, err := batontest.NewEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	shared = env
	code := s.m.Run()
	if err := env.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Short timings, so the lease rules' wait is seconds: a takeover by the death signal
// takes milliseconds, one by the lease rules at least LeaseDuration − RetryPeriod after
// the kill.
const (
	leaseDuration = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 400 * time.Millisecond
	namespace     = "default"
	container     = "c"
)

// candidate is one elector in the test process, standing for the process in one pod's
// container.
type candidate struct {
	pod  string
	inc  incarnation.Incarnation
	el   *leaderelection.Elector
	stop context.CancelFunc
	done chan struct{}

	mu      sync.Mutex
	started []time.Time
}

func (c *candidate) terms() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.started...)
}

// kill stops the elector without releasing (as after SIGKILL, for the lease) and waits
// until it has.
func (c *candidate) kill() {
	c.stop()
	<-c.done
}

func nonce(t *testing.T) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// createPod creates a pod with one container, running, and returns it.
func createPod(t *testing.T, cs kubernetes.Interface, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			Containers:                   []corev1.Container{{Name: container, Image: "baton"}},
			AutomountServiceAccountToken: new(bool),
		},
	}
	p, err := cs.CoreV1().Pods(namespace).Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods(namespace).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	return setContainer(t, cs, p, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}, corev1.ContainerState{})
}

// setContainer plays the kubelet: it writes the container's state and last state.
func setContainer(t *testing.T, cs kubernetes.Interface, p *corev1.Pod, state, last corev1.ContainerState) *corev1.Pod {
	t.Helper()
	p = p.DeepCopy()
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: container, Image: "baton", State: state, LastTerminationState: last}}
	out, err := cs.CoreV1().Pods(namespace).UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status of %s: %v", p.Name, err)
	}
	return out
}

func terminated(inc incarnation.Incarnation) corev1.ContainerState {
	now := metav1.Now()
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 137, Reason: "Error", Message: inc.TerminationLine() + "\n", StartedAt: now, FinishedAt: now,
		ContainerID: "containerd://" + inc.Nonce,
	}}
}

// timings are an election's durations.
type timings struct{ lease, renew, retry time.Duration }

var short = timings{leaseDuration, renewDeadline, retryPeriod}

// figureTimings are the timings of TestTerminatedLeaderReplacedAtOnce: short, or
// BATON_DEATH_TIMINGS (e.g. "60s,45s,5s": a long renew deadline that rides out API
// server blips, with crash failover by the death signal).
func figureTimings(t *testing.T) timings {
	s := os.Getenv("BATON_DEATH_TIMINGS")
	if s == "" {
		return short
	}
	var d [3]time.Duration
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		t.Fatalf("BATON_DEATH_TIMINGS=%q: want lease,renew,retry", s)
	}
	for i, p := range parts {
		v, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil {
			t.Fatalf("BATON_DEATH_TIMINGS=%q: %v", s, err)
		}
		d[i] = v
	}
	if err := leaderelection.CheckDurations(d[0], d[1], d[2]); err != nil {
		t.Fatalf("BATON_DEATH_TIMINGS=%q: %v", s, err)
	}
	return timings{d[0], d[1], d[2]}
}

// start starts an elector for pod's container incarnation inc on lease.
func start(t *testing.T, cs kubernetes.Interface, w *incarnation.Watcher, lease string, inc incarnation.Incarnation, tm timings) *candidate {
	t.Helper()
	c := &candidate{pod: inc.PodName, inc: inc, done: make(chan struct{})}
	el, err := leaderelection.New(leaderelection.Config{
		Identity: inc.PodName, LeaseName: lease, LeaseNamespace: namespace,
		LeaseDuration: tm.lease, RenewDeadline: tm.renew, RetryPeriod: tm.retry,
		Incarnation: inc.String(), DeathWatch: w,
	}, cs, leaderelection.Callbacks{OnStartedLeading: func(ctx context.Context) {
		c.mu.Lock()
		c.started = append(c.started, time.Now())
		c.mu.Unlock()
		<-ctx.Done()
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.el = el
	ctx, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	go func() {
		defer close(c.done)
		if err := el.Start(ctx); err != nil {
			t.Errorf("%s: Start: %v", c.pod, err)
		}
	}()
	t.Cleanup(c.kill)
	return c
}

// leaseName is the name of the test's Lease; its pods are named after it.
func leaseName(t *testing.T) string {
	return "death-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
}

// setup creates pods a and b, starts a and waits until it leads, then starts b and lets
// it watch a few renews.
func setup(t *testing.T, lastA *incarnation.Incarnation, tm timings) (cs kubernetes.Interface, pa *corev1.Pod, a, b *candidate) {
	cs = shared.Clientset()
	w, err := incarnation.NewWatcher(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Wait) // after the candidates stopped (cleanups run last first)
	lease := leaseName(t)
	pa = createPod(t, cs, lease+"-a")
	pb := createPod(t, cs, lease+"-b")
	incA := incarnation.Incarnation{PodNamespace: namespace, PodName: pa.Name, PodUID: string(pa.UID), Container: container, Nonce: nonce(t)}
	incB := incarnation.Incarnation{PodNamespace: namespace, PodName: pb.Name, PodUID: string(pb.UID), Container: container, Nonce: nonce(t)}
	if lastA != nil {
		// a's container was restarted: the previous incarnation's end is its last state.
		lastA.PodUID = string(pa.UID)
		pa = setContainer(t, cs, pa, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}, terminated(*lastA))
	}
	a = start(t, cs, w, lease, incA, tm)
	deadline := time.Now().Add(10 * time.Second)
	for !a.el.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("a does not lead within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	b = start(t, cs, w, lease, incB, tm)
	time.Sleep(3 * tm.retry)
	return cs, pa, a, b
}

// waitTerm waits up to max for c's first term and returns when it started.
func waitTerm(t *testing.T, c *candidate, max time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		if s := c.terms(); len(s) > 0 {
			return s[0]
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%s did not lead within %v", c.pod, max)
	return time.Time{}
}

// TestTerminatedLeaderReplacedAtOnce: the leader stops without releasing, the kubelet
// reports its container terminated: the follower's term starts on the report, before
// the lease rules would let it (LeaseDuration − RetryPeriod after the last renew). How
// soon after the status write is a figure, logged here and measured without the race
// detector, SIGKILL included, by test/crbench's BenchmarkCrashFailover in
// hack/bench.sh (tens of milliseconds), not a timed assertion.
func TestTerminatedLeaderReplacedAtOnce(t *testing.T) {
	for i := range 5 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			tm := figureTimings(t)
			cs, pa, a, b := setup(t, nil, tm)
			a.kill()
			killed := time.Now()
			time.Sleep(100 * time.Millisecond)
			written := time.Now()
			setContainer(t, cs, pa, terminated(a.inc), corev1.ContainerState{})
			answered := time.Now()
			started := waitTerm(t, b, 2*tm.lease)
			t.Logf("next term %v after the status write was sent (%v after its answer)",
				started.Sub(written).Round(time.Millisecond), started.Sub(answered).Round(time.Millisecond))
			if earliest := killed.Add(tm.lease - tm.retry); !started.Before(earliest) {
				t.Fatalf("next term %v after the kill, no sooner than the lease rules allow (%v): the report was not taken",
					started.Sub(killed), tm.lease-tm.retry)
			}
		})
	}
}

// TestForceDeletedLeaderPodIsNoProof: the leader's pod force-deleted while it runs
// is no proof of its death: the follower takes the lease only by the lease rules,
// while the leader runs and once it is killed (no report: its pod is gone). The test
// judges the follower's term against the leader's writes a watch of the Lease saw, not
// against a sleep during which the leader must keep leading: on a loaded machine the
// leader may miss its renews and lose the lease by the rules, which is no failure.
// A follower that took the delete for a proof would take the lease within about a
// RetryPeriod of a renew: the leader's renews after the delete give it the time to.
func TestForceDeletedLeaderPodIsNoProof(t *testing.T) {
	cs, pa, a, b := setup(t, nil, short)
	l := watchLease(t, cs, leaseName(t))
	if err := cs.CoreV1().Pods(namespace).Delete(t.Context(), pa.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	renews, taken := l.awaitRenewsOrTakeover(t, a.pod, deleted, 5, 3*leaseDuration)
	t.Logf("after the force delete: %d renews of a seen, lease taken %v", renews, taken)
	if !taken {
		a.kill()
	}
	started := waitTerm(t, b, 3*leaseDuration)
	checkLeaseRules(t, l, a.pod, started)
}

// TestRestartedContainerIsNotTakenForDead: a's container was restarted (same pod, new
// incarnation): its status shows the previous incarnation terminated; a, the new
// incarnation, leads, and the follower does not take the lease from it: not while a
// renews, and, should load make a miss its renews, only by the lease rules (judged
// against a's writes as a watch of the Lease saw them, as in
// TestForceDeletedLeaderPodIsNoProof).
func TestRestartedContainerIsNotTakenForDead(t *testing.T) {
	prev := incarnation.Incarnation{PodNamespace: namespace, Container: container, Nonce: nonce(t)}
	cs, pa, a, b := setup(t, &prev, short)
	l := watchLease(t, cs, leaseName(t))
	prev.PodName = pa.Name
	// A stale status write after the restart: the previous incarnation terminated.
	setContainer(t, cs, pa, terminated(prev), corev1.ContainerState{})
	written := time.Now()
	renews, taken := l.awaitRenewsOrTakeover(t, a.pod, written, 5, 3*leaseDuration)
	t.Logf("after the stale status: %d renews of a seen, lease taken %v", renews, taken)
	if taken {
		checkLeaseRules(t, l, a.pod, waitTerm(t, b, leaseDuration))
	}
}
