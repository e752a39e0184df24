package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/batontest"
)

// The Lease of MIGRATING.md's program: the scaffold's LeaderElectionID.
const migratedLease = "3f9d2ab1.my.domain"

// TestMigratingGuide applies MIGRATING.md's diff, and nothing else, to its
// scaffold-shaped program, builds the result in a module that requires this checkout
// through a replace, and runs three replicas of it on a real API server with the
// scaffold's --leader-elect and the death signal's pod environment: one leads and
// reconciles; stopped with SIGTERM, it hands the Lease over and another reconciles;
// that one SIGKILLed, the last takes over on the kubelet's report (played by the test)
// and reconciles.
func TestMigratingGuide(t *testing.T) {
	text, err := os.ReadFile("MIGRATING.md")
	if err != nil {
		t.Fatal(err)
	}
	before := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(string(text))
	diff := regexp.MustCompile("(?s)```diff\n(.*?)```").FindStringSubmatch(string(text))
	if before == nil || diff == nil {
		t.Fatal("MIGRATING.md: want the program before (```go) and the changes (```diff)")
	}
	after, err := applyDiff(before[1], diff[1])
	if err != nil {
		t.Fatalf("MIGRATING.md's diff does not apply to its program: %v", err)
	}
	bin := build(t, after)
	env := batontest.StartEnv(t)
	runMigrated(t, env.Clientset(), bin, env.Kubeconfig(t))
}

func runMigrated(t *testing.T, cs kubernetes.Interface, bin, kubeconfig string) {
	ctx := t.Context()
	var ps []*process
	var pods []*corev1.Pod
	var termLogs []string
	for i := range 3 {
		// Each replica runs as in a pod of deploy/components/baton: the Downward-API
		// variables of the death signal, and its own termination message file.
		pod := createPod(t, cs, fmt.Sprintf("migrated-%d", i))
		termLog := filepath.Join(t.TempDir(), "termination-log")
		env := []string{"POD_NAMESPACE=default", "POD_NAME=" + pod.Name, "POD_UID=" + string(pod.UID),
			"CONTAINER_NAME=" + migratedContainer, "TERMINATION_MESSAGE_PATH=" + termLog}
		ps = append(ps, startWithEnv(t, env, bin, "--kubeconfig", kubeconfig, "--leader-elect",
			"--leader-elect-resource-namespace=default",
			"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0"))
		pods, termLogs = append(pods, pod), append(termLogs, termLog)
	}
	seen := func(name string) bool {
		cm, err := cs.CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && cm.Data["seen"] == "true"
	}
	create := func(name string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "guestbook"}}}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("first")
	batontest.WaitFor(t, 90*time.Second, "the first ConfigMap reconciled", func() bool { return seen("first") })
	first, leader := migratedLeader(t, cs, ps)
	if err := ps[leader].stop(); err != nil {
		t.Fatalf("the leader after SIGTERM: %v\n%s", err, ps[leader].output())
	}
	create("second")
	batontest.WaitFor(t, 30*time.Second, "the second ConfigMap reconciled by the next leader", func() bool { return seen("second") })
	next, nextLeader := migratedLeader(t, cs, ps)
	if next == first {
		t.Fatalf("after the leader's SIGTERM the Lease is held by %q", next)
	}
	t.Logf("replica %s led, then %s", first, next)
	crashTakenOver(t, cs, ps, nextLeader, pods[nextLeader], termLogs[nextLeader])
	create("third")
	batontest.WaitFor(t, 30*time.Second, "the third ConfigMap reconciled by the last replica", func() bool { return seen("third") })
}

// migratedContainer is the container name of the migrated program's pods.
const migratedContainer = "manager"

// migratedLeader returns the Lease's holder and the index of the replica that logs it
// as its own identity.
func migratedLeader(t *testing.T, cs kubernetes.Interface, ps []*process) (string, int) {
	t.Helper()
	holder := leaseHolder(t, cs, migratedLease)
	// Each replica logs its own identity under the key "identity"; the others name
	// the holder too, under other keys, so a bare match could pick a follower.
	own := regexp.MustCompile(`"identity":\s*"` + regexp.QuoteMeta(holder) + `"`)
	for i, p := range ps {
		if holder != "" && own.MatchString(p.output()) {
			return holder, i
		}
	}
	t.Fatalf("the Lease is held by %q, which no replica's log names", holder)
	return "", -1
}

// crashTakenOver SIGKILLs the leader ps[leader], then plays the kubelet: it copies the
// leader's termination message file into its pod's terminated container state. The
// last replica must take the Lease within deathTakeover of that write, well inside
// the 13–15s a crash is otherwise waited out for (15s LeaseDuration, 2s renews).
// The kill waits for a renew of the leader's: a follower acts on the report only
// once it has seen the holder renew on its watch (the first-look rule).
func crashTakenOver(t *testing.T, cs kubernetes.Interface, ps []*process, leader int, pod *corev1.Pod, termLog string) {
	t.Helper()
	const deathTakeover = 8 * time.Second
	holder := leaseHolder(t, cs, migratedLease)
	renewed := leaseRenewTime(t, cs, migratedLease)
	batontest.WaitFor(t, 10*time.Second, "a renew of the new leader's", func() bool {
		return leaseRenewTime(t, cs, migratedLease).After(renewed)
	})
	ps[leader].kill()
	msg, err := os.ReadFile(termLog)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(msg), "baton-incarnation:") {
		t.Fatalf("the leader's termination message file holds %q, want its incarnation's line", msg)
	}
	setContainer(t, cs, pod, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 137, Reason: "Error", Message: string(msg), FinishedAt: metav1.Now()}})
	written := time.Now()
	batontest.WaitFor(t, deathTakeover, "the Lease taken over on the kubelet's report", func() bool {
		h := leaseHolder(t, cs, migratedLease)
		return h != "" && h != holder
	})
	t.Logf("SIGKILLed leader %s; the Lease moved %v after the kubelet's report",
		holder, time.Since(written).Round(time.Millisecond))
}

// leaseRenewTime returns the Lease's renewTime, zero when it cannot be read.
func leaseRenewTime(t *testing.T, cs kubernetes.Interface, name string) time.Time {
	l, err := cs.CoordinationV1().Leases("default").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil || l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// createPod creates a pod of the migrated program, its container running, as the
// kubelet would report it.
func createPod(t *testing.T, cs kubernetes.Interface, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers:                   []corev1.Container{{Name: migratedContainer, Image: "controller:latest"}},
			AutomountServiceAccountToken: new(bool),
		},
	}
	p, err := cs.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	return setContainer(t, cs, p, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}})
}

// setContainer plays the kubelet: it writes the pod's container state.
func setContainer(t *testing.T, cs kubernetes.Interface, p *corev1.Pod, state corev1.ContainerState) *corev1.Pod {
	t.Helper()
	p = p.DeepCopy()
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: migratedContainer, Image: "controller:latest", State: state}}
	out, err := cs.CoreV1().Pods("default").UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status of %s: %v", p.Name, err)
	}
	return out
}

// applyDiff applies a unified diff's hunks to src: each hunk's old lines (context and
// "-") must occur once in src, and are replaced by its new lines (context and "+").
func applyDiff(src, diff string) (string, error) {
	hunks := strings.Split(diff, "\n@@")
	for i, h := range hunks {
		_, body, ok := strings.Cut(h, "\n")
		if !ok || (i == 0 && !strings.HasPrefix(h, "@@")) {
			return "", fmt.Errorf("hunk %d: no @@ header", i)
		}
		var old, new strings.Builder
		for line := range strings.Lines(body) {
			switch {
			case strings.HasPrefix(line, " "):
				old.WriteString(line[1:])
				new.WriteString(line[1:])
			case strings.HasPrefix(line, "-"):
				old.WriteString(line[1:])
			case strings.HasPrefix(line, "+"):
				new.WriteString(line[1:])
			case line == "\n":
				old.WriteString(line)
				new.WriteString(line)
			default:
				return "", fmt.Errorf("hunk %d: line %q", i, line)
			}
		}
		if n := strings.Count(src, old.String()); n != 1 {
			return "", fmt.Errorf("hunk %d occurs %d times in the program:\n%s", i, n, old.String())
		}
		src = strings.Replace(src, old.String(), new.String(), 1)
	}
	return src, nil
}
