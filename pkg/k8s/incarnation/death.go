package incarnation

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ProvesDead reports whether pod's status proves inc over: pod has inc's UID, and the
// status of inc's container shows a terminated state, its current state or the last
// one before a restart, whose message has inc's TerminationLine as a line. The
// container's status is looked for among the containers' and the init containers'
// (a native sidecar, an init container with restartPolicy Always, reports there);
// container names are unique across both in a pod. Anything
// else is no proof (see the package doc): a nil pod (gone), a deletion timestamp, a
// phase of Unknown, another pod UID, another container, a terminated state without the
// line. The namespace and name are not compared: the caller watched that pod; the UID
// decides.
func ProvesDead(inc Incarnation, pod *corev1.Pod) bool {
	if pod == nil || inc.Nonce == "" || string(pod.UID) != inc.PodUID {
		return false
	}
	line := inc.TerminationLine()
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for _, cs := range statuses {
			if cs.Name != inc.Container {
				continue
			}
			if carries(cs.State.Terminated, line) || carries(cs.LastTerminationState.Terminated, line) {
				return true
			}
		}
	}
	return false
}

// carries reports whether t is a terminated state whose message has line as a line.
func carries(t *corev1.ContainerStateTerminated, line string) bool {
	if t == nil {
		return false
	}
	for l := range strings.Lines(t.Message) {
		if strings.TrimRight(l, "\r\n") == line {
			return true
		}
	}
	return false
}
