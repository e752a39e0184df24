package demo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	podinc "github.com/baton-dev/baton/pkg/k8s/incarnation"
)

// The demo's pods: one per replica, named after it, in a namespace of their
// own, with one container.
const (
	kubeletNamespace = "baton-demo"
	kubeletContainer = "baton"
)

// kubelet simulates the kubelets of the replicas' pods, for the death
// signal of the elections (leaderelection.Config.DeathWatch). Each replica
// runs in a pod of its own, named after it; each start of a replica is a
// new incarnation of the pod's container. The engine tells the kubelet when
// a start runs and, once its process is over (Run returned), that it
// terminated; the pod's status then carries the incarnation's termination
// line, as a real kubelet copies the container's termination message file.
// Dead decides with incarnation.ProvesDead, the check the Kubernetes
// watcher makes. Its methods are safe for concurrent use.
type kubelet struct {
	wg sync.WaitGroup // the goroutines of Dead

	// mu guards the fields below.
	mu      sync.Mutex
	rng     *rand.Rand             // draws the nonces
	pods    map[string]*corev1.Pod // by name; each status is replaced, never changed in place
	changed chan struct{}          // closed and replaced on every status written
}

func newKubelet(seed uint64) *kubelet {
	return &kubelet{rng: rand.New(rand.NewPCG(seed, 0x6b75626c)), pods: map[string]*corev1.Pod{}, changed: make(chan struct{})}
}

// incarnation returns a new incarnation of replica's container, with a
// fresh nonce.
func (k *kubelet) incarnation(replica string) podinc.Incarnation {
	k.mu.Lock()
	defer k.mu.Unlock()
	return podinc.Incarnation{
		PodNamespace: kubeletNamespace, PodName: replica, PodUID: "uid-" + replica, Container: kubeletContainer,
		Nonce: fmt.Sprintf("%016x%016x", k.rng.Uint64(), k.rng.Uint64()),
	}
}

// started reports inc's container running; a termination reported before
// becomes the container's last state, as after a restart.
func (k *kubelet) started(inc podinc.Incarnation) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var last corev1.ContainerState
	if p := k.pods[inc.PodName]; p != nil && p.Status.ContainerStatuses[0].State.Terminated != nil {
		last = p.Status.ContainerStatuses[0].State
	}
	k.setLocked(inc, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, last)
}

// terminated reports inc's container terminated, with inc's termination
// line, and returns when. Call it only once inc's process is over: the
// report lets a follower take the lease at once.
func (k *kubelet) terminated(inc podinc.Incarnation, exitCode int32) time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	k.setLocked(inc, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: exitCode, Message: inc.TerminationLine() + "\n", FinishedAt: metav1.NewTime(now),
	}}, corev1.ContainerState{})
	return now
}

// setLocked writes the status of inc's pod and wakes the goroutines of
// Dead.
func (k *kubelet) setLocked(inc podinc.Incarnation, state, last corev1.ContainerState) {
	k.pods[inc.PodName] = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: inc.PodNamespace, Name: inc.PodName, UID: types.UID(inc.PodUID)},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: inc.Container, State: state, LastTerminationState: last},
		}},
	}
	close(k.changed)
	k.changed = make(chan struct{})
}

// Dead implements leaderelection.DeathWatch: the channel is closed once the
// status of the pod of incarnation proves it over (incarnation.ProvesDead),
// never otherwise; an incarnation that does not parse is never proven. One
// goroutine per call checks each status written until the proof or the end
// of ctx; wait waits for them.
func (k *kubelet) Dead(ctx context.Context, incarnation string) <-chan struct{} {
	dead := make(chan struct{})
	inc, err := podinc.Parse(incarnation)
	if err != nil {
		return dead
	}
	k.wg.Go(func() {
		for {
			k.mu.Lock()
			proven := podinc.ProvesDead(inc, k.pods[inc.PodName])
			changed := k.changed
			k.mu.Unlock()
			if proven {
				close(dead)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
	})
	return dead
}

// wait waits for the goroutines of Dead; each ends with its context (an
// elector's, once it stopped) or a proof.
func (k *kubelet) wait() { k.wg.Wait() }
