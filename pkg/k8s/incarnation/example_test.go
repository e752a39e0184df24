package incarnation_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/pkg/k8s/incarnation"
	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// The Watcher is the elector's death watch.
var _ leaderelection.DeathWatch = (*incarnation.Watcher)(nil)

// ExampleProvesDead: only the kubelet's report of the container terminated with the
// incarnation's line proves it over; a pod being deleted does not.
func ExampleProvesDead() {
	inc := incarnation.Incarnation{PodNamespace: "baton", PodName: "baton-0", PodUID: "uid-1",
		Container: "baton", Nonce: "0123456789abcdef0123456789abcdef"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "baton-0", UID: "uid-1"}}
	now := metav1.Now()
	pod.DeletionTimestamp = &now
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "baton",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	fmt.Println("being deleted:", incarnation.ProvesDead(inc, pod))

	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 137, Message: inc.TerminationLine() + "\n"}}
	fmt.Println("terminated with its line:", incarnation.ProvesDead(inc, pod))
	// Output:
	// being deleted: false
	// terminated with its line: true
}
