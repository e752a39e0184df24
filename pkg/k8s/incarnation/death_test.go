package incarnation_test

import (
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/baton-dev/baton/internal/testseed"
	"github.com/baton-dev/baton/pkg/k8s/incarnation"
)

var inc = incarnation.Incarnation{
	PodNamespace: "baton", PodName: "baton-0", PodUID: "0b7a3c2e-0000-4000-8000-000000000001",
	Container: "baton", Nonce: "0123456789abcdef0123456789abcdef",
}

const otherNonce = "fedcba9876543210fedcba9876543210"

func terminated(message string) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", Message: message, ContainerID: "containerd://x"}
}

func running() *corev1.ContainerStateRunning {
	return &corev1.ContainerStateRunning{StartedAt: metav1.Now()}
}

// pod returns a pod of inc's UID with one container status for name.
func pod(name string, state, last corev1.ContainerState) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: inc.PodNamespace, Name: inc.PodName, UID: types.UID(inc.PodUID)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: name, State: state, LastTerminationState: last},
		}},
	}
}

func TestProvesDead(t *testing.T) {
	line := inc.TerminationLine()
	other := "baton-incarnation:" + otherNonce
	for _, tc := range []struct {
		name string
		pod  func() *corev1.Pod
		want bool
	}{
		{"terminated with our line", func() *corev1.Pod {
			return pod("baton", corev1.ContainerState{Terminated: terminated(line + "\n")}, corev1.ContainerState{})
		}, true},
		{"terminated, line among others", func() *corev1.Pod {
			return pod("baton", corev1.ContainerState{Terminated: terminated("starting\n" + line + "\r\npanic: boom")}, corev1.ContainerState{})
		}, true},
		{"restarted: newer incarnation runs, last state ours", func() *corev1.Pod {
			return pod("baton", corev1.ContainerState{Running: running()}, corev1.ContainerState{Terminated: terminated(line)})
		}, true},
		{"restarting: waiting, last state ours", func() *corev1.Pod {
			return pod("baton", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				corev1.ContainerState{Terminated: terminated(line)})
		}, true},
		{"pod gone (force delete)", func() *corev1.Pod { return nil }, false},
		{"running", func() *corev1.Pod {
			return pod("baton", corev1.ContainerState{Running: running()}, corev1.ContainerState{})
		}, false},
		{"deletion timestamp, still running", func() *corev1.Pod {
			p := pod("baton", corev1.ContainerState{Running: running()}, corev1.ContainerState{})
			now := metav1.Now()
			p.DeletionTimestamp = &now
			return p
		}, false},
		{"phase Unknown (node cut off)", func() *corev1.Pod {
			p := pod("baton", corev1.ContainerState{Running: running()}, corev1.ContainerState{})
			p.Status.Phase = corev1.PodUnknown
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "NodeNotReady"}}
			return p
		}, false},
		{"older incarnation terminated, ours runs", func() *corev1.Pod {
			return pod("baton", corev1.ContainerState{Running: running()}, corev1.ContainerState{Terminated: terminated(other)})
		}, false},
		{"older incarnation terminated (stale status)", func() *corev1.Pod {
			return pod("baton", corev1.ContainerState{Terminated: terminated(other)}, corev1.ContainerState{})
		}, false},
		{"terminated without a message (overwritten file)", func() *corev1.Pod {
			return pod("baton", corev1.ContainerState{Terminated: terminated("")}, corev1.ContainerState{})
		}, false},
		{"line only as a substring", func() *corev1.Pod {
			return pod("baton", corev1.ContainerState{Terminated: terminated("x" + line)}, corev1.ContainerState{})
		}, false},
		{"another container terminated with our line", func() *corev1.Pod {
			return pod("sidecar", corev1.ContainerState{Terminated: terminated(line)}, corev1.ContainerState{})
		}, false},
		{"another pod UID (re-created pod of the same name)", func() *corev1.Pod {
			p := pod("baton", corev1.ContainerState{Terminated: terminated(line)}, corev1.ContainerState{})
			p.UID = "0b7a3c2e-0000-4000-8000-000000000002"
			return p
		}, false},
		{"native sidecar (init container, restartPolicy Always) restarted, last state ours", func() *corev1.Pod {
			p := pod("app", corev1.ContainerState{Running: running()}, corev1.ContainerState{})
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "baton", State: corev1.ContainerState{Running: running()},
				LastTerminationState: corev1.ContainerState{Terminated: terminated(line + "\n")}}}
			return p
		}, true},
		{"native sidecar terminated with our line", func() *corev1.Pod {
			p := pod("app", corev1.ContainerState{Running: running()}, corev1.ContainerState{})
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "baton", State: corev1.ContainerState{Terminated: terminated(line)}}}
			return p
		}, true},
		{"native sidecar running, an older incarnation's end", func() *corev1.Pod {
			p := pod("app", corev1.ContainerState{Running: running()}, corev1.ContainerState{})
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "baton", State: corev1.ContainerState{Running: running()},
				LastTerminationState: corev1.ContainerState{Terminated: terminated(other)}}}
			return p
		}, false},
		{"another init container terminated with our line", func() *corev1.Pod {
			p := pod("baton", corev1.ContainerState{Running: running()}, corev1.ContainerState{})
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "setup", State: corev1.ContainerState{Terminated: terminated(line)}}}
			return p
		}, false},
		{"pod phase Failed without our container's state", func() *corev1.Pod {
			p := pod("baton", corev1.ContainerState{}, corev1.ContainerState{})
			p.Status.Phase = corev1.PodFailed
			return p
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := incarnation.ProvesDead(inc, tc.pod()); got != tc.want {
				t.Fatalf("ProvesDead = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestProvesDeadRandomized builds random pod statuses from parts and checks ProvesDead
// against its definition, stated independently: proof iff the same UID and, for the
// same container (among the containers or the init containers), a terminated state
// (current or last) whose message has the line. In
// particular no status without our line (any mix of running, waiting, deletion,
// Unknown, other nonces, other containers) is ever proof.
func TestProvesDeadRandomized(t *testing.T) {
	for _, seed := range testseed.Seeds(t, 1, 2, 3, 4, 5, 6, 7, 8) {
		r := rand.New(rand.NewPCG(seed, 19))
		for i := range 2000 {
			p, want := randomPod(r)
			if got := incarnation.ProvesDead(inc, p); got != want {
				t.Fatalf("seed %d, case %d: ProvesDead = %v, want %v\npod: %+v", seed, i, got, want, p)
			}
		}
	}
}

// randomPod returns a random pod (possibly nil) and whether it proves inc dead.
func randomPod(r *rand.Rand) (*corev1.Pod, bool) {
	if r.IntN(10) == 0 {
		return nil, false
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: inc.PodNamespace, Name: inc.PodName, UID: types.UID(inc.PodUID)}}
	sameUID := r.IntN(5) != 0
	if !sameUID {
		p.UID = "0b7a3c2e-0000-4000-8000-00000000000f"
	}
	if r.IntN(4) == 0 {
		now := metav1.NewTime(time.Unix(1e9, 0))
		p.DeletionTimestamp = &now
	}
	p.Status.Phase = []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodFailed, corev1.PodUnknown}[r.IntN(4)]
	messages := []string{"", inc.TerminationLine(), "baton-incarnation:" + otherNonce, "log\n" + inc.TerminationLine() + "\n", inc.TerminationLine() + "x"}
	ours := []bool{false, true, false, true, false}
	want := false
	state := func(name string) corev1.ContainerState {
		switch r.IntN(4) {
		case 0:
			return corev1.ContainerState{}
		case 1:
			return corev1.ContainerState{Running: running()}
		case 2:
			return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
		default:
			m := r.IntN(len(messages))
			if name == inc.Container && ours[m] && sameUID {
				want = true
			}
			return corev1.ContainerState{Terminated: terminated(messages[m])}
		}
	}
	for range r.IntN(3) + 1 {
		name := []string{inc.Container, "sidecar"}[r.IntN(2)]
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: name, State: state(name), LastTerminationState: state(name), RestartCount: r.Int32N(5),
		})
	}
	// Init containers, ours among them as a native sidecar.
	for range r.IntN(3) {
		name := []string{inc.Container, "setup"}[r.IntN(2)]
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{
			Name: name, State: state(name), LastTerminationState: state(name), RestartCount: r.Int32N(5),
		})
	}
	return p, want
}
