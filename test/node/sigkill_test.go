package node

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// exitSIGKILL is the exit code the kubelet reports for a process killed by
// SIGKILL (128 + 9), an OOM kill included.
const exitSIGKILL = 137

// TestSIGKILLLeader: the leader's container process is SIGKILLed from the host,
// several times; each time the kubelet reports the container terminated (exit
// 137, the termination message carrying the killed run's nonce line) and the
// follower starts the next term: with the death signal at once, without it
// after the lease. Each killed pod is replaced by a fresh one before the next
// kill, so the kubelet's restart back-off never comes into play.
func TestSIGKILLLeader(t *testing.T) {
	c := node(t)
	for _, ds := range []bool{true, false} {
		t.Run(fmt.Sprintf("death-signal=%v", ds), func(t *testing.T) { c.killRounds(t, ds) })
	}
}

// killRounds runs kills(t) rounds of SIGKILL → report → next term.
func (c *cluster) killRounds(t *testing.T, deathSignal bool) {
	c.fresh(t, false, false)
	lease := c.watchLease(t, ns, leaseName)
	opts := podOptions{deathSignal: deathSignal}
	mode := map[bool]string{true: "ds", false: "nods"}[deathSignal]
	next := 0
	newPod := func() string {
		name := fmt.Sprintf("kill-%s-%d", mode, next)
		next++
		c.run(t, batonPod(t, name, opts))
		return name
	}
	pods := []string{newPod()}
	lease.await(t, 2*time.Minute, "a holder", func(s leaseState) bool { return s.Holder != "" })
	pods = append(pods, newPod())
	var report, takeover stats
	killed := map[string]bool{}
	for i := range kills(t) {
		cur, _, _ := lease.last()
		killed[cur.Holder] = true
		// Space the kills: the new follower has seen a renewal of the term by a
		// watch event (a term first seen on a list is not taken on a death).
		time.Sleep(settle)
		r, tk, holder := c.killLeader(t, lease, i, deathSignal)
		report, takeover = append(report, r), append(takeover, tk)
		// Replace every pod that was killed and does not lead now.
		var keep []string
		for _, p := range pods {
			if p == holder || !killed[p] {
				keep = append(keep, p)
				continue
			}
			c.deletePod(t, p)
		}
		for len(keep) < 2 {
			keep = append(keep, newPod())
		}
		pods = keep
	}
	lease.checkHistory(t)
	figure(t, fmt.Sprintf("SIGKILL -> kubelet terminated status (death-signal=%v)", deathSignal), report)
	figure(t, fmt.Sprintf("SIGKILL -> next term (death-signal=%v)", deathSignal), takeover)
	for _, p := range pods {
		c.deletePod(t, p)
	}
}

// settle is how long a kill waits after the follower turned Ready
// (BATON_NODE_SETTLE overrides it, e.g. 0s to kill at once).
var settle = 5 * time.Second

func init() {
	if v, err := time.ParseDuration(os.Getenv("BATON_NODE_SETTLE")); err == nil {
		settle = v
	}
}

// killLeader SIGKILLs the Lease holder's container and returns the times from
// the kill to the kubelet's terminated status and to the next term, and the
// next term's holder. With the death signal the terminated state must carry
// the killed run's nonce line; when the next term took longer than 5s its
// holder's log lines about the death signal are logged.
func (c *cluster) killLeader(t *testing.T, lease *leaseLog, round int, deathSignal bool) (report, takeover time.Duration, holder string) {
	t.Helper()
	cur, _, _ := lease.last()
	nonce := nonceOf(cur)
	pod := c.pod(t, cur.Holder)
	id := runningID(pod, container)
	if id == "" {
		t.Fatalf("the holder %s has no running container: %s", cur.Holder, describe(pod))
	}
	log := c.watchPod(t, ns, cur.Holder)
	log.await(t, 10*time.Second, "the pod watch", func(*corev1.Pod) bool { return true })
	at := c.sigkill(t, id)
	p, seen := log.await(t, time.Minute, "the kubelet's terminated status of "+cur.Holder, func(p *corev1.Pod) bool {
		return terminatedRun(p, container, id) != nil
	})
	term := terminatedRun(p, container, id)
	if deathSignal {
		checkTerminated(t, term, nonce, "Error")
	} else if term.ExitCode != exitSIGKILL {
		t.Errorf("terminated: exit %d, want %d", term.ExitCode, exitSIGKILL)
	}
	nextTerm := lease.await(t, 2*time.Minute, "the next term", func(s leaseState) bool {
		return s.Holder != "" && s.term() != cur.term()
	})
	report, takeover = seen.Sub(at), nextTerm.Seen.Sub(at)
	if deathSignal && takeover > 5*time.Second {
		c.logDeathLines(t, ns, nextTerm.Holder, container)
	}
	t.Logf("kill %d: %s killed (term of %s); kubelet reported it terminated after %s; %s's term started after %s",
		round, cur.Holder, cur.Acquired.Format(time.RFC3339), ms(report), nextTerm.Holder, ms(takeover))
	return report, takeover, nextTerm.Holder
}

// checkTerminated checks the kubelet's terminated state of a killed run: exit
// 137, the reason, and the run's nonce line as the message.
func checkTerminated(t *testing.T, term *corev1.ContainerStateTerminated, nonce, reason string) {
	t.Helper()
	if term.ExitCode != exitSIGKILL || term.Reason != reason {
		t.Errorf("terminated: exit %d reason %q, want %d %q", term.ExitCode, term.Reason, exitSIGKILL, reason)
	}
	if nonce == "" || !strings.Contains(term.Message, "baton-incarnation:"+nonce) {
		t.Errorf("terminated: message %q lacks the killed run's nonce line baton-incarnation:%s", term.Message, nonce)
	}
}

// TestOOMKilledLeader: the leader allocates past its container's memory limit
// (--debug-oom-after); the kernel kills it, the kubelet reports OOMKilled with
// the run's nonce line, and the follower takes over at once. kills(t) rounds,
// each with fresh pods.
func TestOOMKilledLeader(t *testing.T) {
	c := node(t)
	c.fresh(t, false, false)
	lease := c.watchLease(t, ns, leaseName)
	var report, takeover stats
	holder := ""
	for i := range kills(t) {
		r, tk, next := c.oomRound(t, lease, i, holder)
		report, takeover, holder = append(report, r), append(takeover, tk), next
	}
	lease.checkHistory(t)
	figure(t, "OOM kill -> kubelet OOMKilled status", report)
	figure(t, "OOM kill -> next term", takeover)
	c.deletePod(t, holder)
}

// oomRound starts oom-a-<round>, which runs out of memory after a while, and
// gets it the Lease: at once when nobody holds it, else by deleting prev, the
// holder, gracefully (it releases the Lease, and oom-a takes it on the
// release's watch event). It then starts the follower oom-b-<round> and waits
// for oom-a's OOM kill. It returns the times from the process's end to the
// kubelet's OOMKilled status and to the next term, and the next term's holder.
func (c *cluster) oomRound(t *testing.T, lease *leaseLog, round int, prev string) (report, takeover time.Duration, holder string) {
	t.Helper()
	const oomAfter = 25 * time.Second
	started := time.Now()
	a := c.run(t, batonPod(t, fmt.Sprintf("oom-a-%d", round), podOptions{deathSignal: true, oomAfter: oomAfter, memory: "128Mi"}))
	if prev != "" {
		time.Sleep(settle) // oom-a watches the Lease
		if err := c.cs.CoreV1().Pods(ns).Delete(context.Background(), prev, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cur := lease.await(t, time.Minute, a.Name+" leads", func(s leaseState) bool { return s.Holder == a.Name })
	b := c.run(t, batonPod(t, fmt.Sprintf("oom-b-%d", round), podOptions{deathSignal: true}))
	if time.Since(started) > oomAfter-3*time.Second {
		t.Fatalf("%s took %v to be Ready: %s may be killed before it follows", b.Name, time.Since(started), a.Name)
	}
	id := runningID(c.pod(t, a.Name), container)
	log := c.watchPod(t, ns, a.Name)
	dead := <-gone(context.Background(), c.hostPID(t, id))
	p, seen := log.await(t, time.Minute, "the kubelet's OOMKilled status", func(p *corev1.Pod) bool {
		return terminatedRun(p, container, id) != nil
	})
	checkTerminated(t, terminatedRun(p, container, id), nonceOf(cur), "OOMKilled")
	next := lease.await(t, time.Minute, "the next term", func(s leaseState) bool { return s.Holder != "" && s.term() != cur.term() })
	if next.Holder != b.Name {
		t.Errorf("after the OOM kill the Lease is held by %s, want %s", next.Holder, b.Name)
	}
	t.Logf("OOM %d: %s killed; kubelet reported OOMKilled after %s; %s's term started after %s",
		round, a.Name, ms(seen.Sub(dead)), next.Holder, ms(next.Seen.Sub(dead)))
	c.deletePod(t, a.Name) // restarted in place, a follower
	return seen.Sub(dead), next.Seen.Sub(dead), next.Holder
}

// TestRestartInPlaceKeepsLease: a container restarted in place keeps its
// killed run's terminated state as lastState, whose nonce is not the new
// run's. When the restarted run leads, that stale report never moves the
// Lease, however often the pod's status changes.
func TestRestartInPlaceKeepsLease(t *testing.T) {
	c := node(t)
	c.fresh(t, false, false)
	lease := c.watchLease(t, ns, leaseName)
	opts := podOptions{deathSignal: true}
	c.run(t, batonPod(t, "restart-a", opts))
	first := lease.await(t, time.Minute, "restart-a leads", func(s leaseState) bool { return s.Holder == "restart-a" })
	c.run(t, batonPod(t, "restart-b", opts))
	// restart-a is killed and restarts in place; restart-b leads.
	time.Sleep(settle)
	_, _, holder := c.killLeader(t, lease, 0, true)
	if holder != "restart-b" {
		t.Fatalf("after restart-a's kill the Lease is held by %s", holder)
	}
	c.awaitReady(t, "restart-a")
	time.Sleep(settle)
	// restart-b is killed: restart-a's new run takes over, its pod still
	// reporting the first run's termination.
	_, _, holder = c.killLeader(t, lease, 1, true)
	if holder != "restart-a" {
		t.Fatalf("after restart-b's kill the Lease is held by %s", holder)
	}
	cur, _, _ := lease.last()
	a := c.pod(t, "restart-a")
	last := a.Status.ContainerStatuses[0].LastTerminationState.Terminated
	if last == nil || !strings.Contains(last.Message, "baton-incarnation:"+nonceOf(first)) || nonceOf(cur) == nonceOf(first) {
		t.Fatalf("restart-a's lastState %+v does not carry the first run's nonce %s (now %s)", last, nonceOf(first), nonceOf(cur))
	}
	// Status changes of the leader's pod wake the followers' watch of it: each
	// sees the stale report again, and must ignore it.
	for i := range 10 {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"node-e2e/poke":"%d"}}}`, i)
		if _, err := c.cs.CoreV1().Pods(ns).Patch(context.Background(), "restart-a", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
	}
	if now, _, _ := lease.last(); now.term() != cur.term() {
		t.Errorf("the Lease moved from %s to %s: a stale lastState was taken for the leader's death", cur.term(), now.term())
	}
	lease.checkHistory(t)
	c.deletePod(t, "restart-a")
	c.deletePod(t, "restart-b")
}

// logDeathLines logs the lines of the container's log that contain one of
// words (default: about the death signal and the lease).
func (c *cluster) logDeathLines(t *testing.T, namespace, pod, container string, words ...string) {
	t.Helper()
	if len(words) == 0 {
		words = []string{"death", "dead", "lease", "term"}
	}
	raw, err := c.cs.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(context.Background())
	if err != nil {
		t.Logf("the log of %s: %v", pod, err)
		return
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if slices.ContainsFunc(words, func(w string) bool { return strings.Contains(line, w) }) {
			t.Logf("%s: %s", pod, line)
		}
	}
}
