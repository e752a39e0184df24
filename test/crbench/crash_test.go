package crbench

// BenchmarkCrashFailover measures crash failover, against one real kube-apiserver:
//
//	export KUBEBUILDER_ASSETS=$(hack/testenv.sh | tail -n 1)
//	go test -run '^$' -bench BenchmarkCrashFailover -benchtime 1x -timeout 60m ./test/crbench/
//
// Knobs (environment):
//
//	BATON_CRASH_TIMINGS="15s,10s,2s 60s,45s,5s"  lease,renew,retry triples, each measured
//	                                            (default: BATON_BENCH_TIMINGS if set, else both)
//	BATON_CRASH_ROUNDS=5                        crashes per implementation and timing
//	BATON_CRASH_REPORT_DELAY=500ms              from the SIGKILL to the kubelet's report
//
// Implementations, each replica a process of its own (this test binary re-executed, see
// childMain): "client-go" (client-go's leaderelection on a LeaseLock, no controller),
// "cr-stock" (a manager with controller-runtime's leader election and the ConfigMap
// controller with EnableWarmup), "baton-cr" (that controller on Baton's integration,
// Options.DeathSignal false) and "baton-cr-death" (the same with the death signal on:
// each replica has the pod environment, POD_NAMESPACE, POD_NAME, POD_UID and
// CONTAINER_NAME, of a pod the benchmark created, and writes its incarnation's nonce to
// its termination message file).
//
// Each round, on one Lease per implementation and timing: a new follower starts and
// watches the leader for three retry periods; at a random moment of a retry period the
// leader process is SIGKILLed; the benchmark then plays the kubelet: BATON_CRASH_REPORT_DELAY
// after the SIGKILL (or once the process is reaped, if later) it writes the killed
// container's status, terminated with exit code 137 and the process's termination
// message file as the message (the incarnation's nonce line; empty for the
// implementations that write none), as a kubelet does once it sees the container exit.
// Measured: from the SIGKILL, and from the status write being sent, to the start of the
// next term as the follower process reports it (client-go: OnStartedLeading; cr-stock:
// Elected closed; baton: its leader-only runnable started), on that process's clock (the
// same machine's). For Baton, the new leader's baton_death_takeovers_total says whether
// the takeover was made on the death signal.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/pkg/k8s/incarnation"
)

// crashImpls are the implementations of BenchmarkCrashFailover, in the table's order.
var crashImpls = []string{implClientGo, implStock, implBaton, implBatonDeath}

// crashContainer is the container name of every replica's pod.
const crashContainer = "manager"

// defaultCrashTimings are the two figures: the default timings, and a long
// renew deadline that rides out API server blips.
const defaultCrashTimings = "15s,10s,2s 60s,45s,5s"

// crashTimings parses s, lease,renew,retry triples separated by spaces.
func crashTimings(s string) ([]timings, error) {
	var tms []timings
	for f := range strings.FieldsSeq(s) {
		tm, err := parseTimings(f)
		if err != nil {
			return nil, err
		}
		tms = append(tms, tm)
	}
	if len(tms) == 0 {
		return nil, fmt.Errorf("timings %q: want one or more lease,renew,retry", s)
	}
	return tms, nil
}

// crashResult is what one implementation measured at one timing.
type crashResult struct {
	crash       []time.Duration // SIGKILL → next term
	afterReport []time.Duration // status write sent → next term
	report      []time.Duration // SIGKILL → status write sent
	byDeath     int             // takeovers made on the death signal; -1: not Baton
}

func BenchmarkCrashFailover(b *testing.B) {
	spec := os.Getenv("BATON_CRASH_TIMINGS")
	if spec == "" {
		spec = os.Getenv("BATON_BENCH_TIMINGS")
	}
	if spec == "" {
		spec = defaultCrashTimings
	}
	tms, err := crashTimings(spec)
	if err != nil {
		b.Fatalf("BATON_CRASH_TIMINGS: %v", err)
	}
	rounds := benchInt(b, "BATON_CRASH_ROUNDS", 5)
	delay := benchDuration(b, "BATON_CRASH_REPORT_DELAY", 500*time.Millisecond)
	newHarness(b) // the bench namespace and its ConfigMaps
	kubeconfig := shared.Kubeconfig(b)
	results := map[string]*crashResult{}
	for _, tm := range tms {
		b.Run(strings.ReplaceAll(tm.String(), "/", "-"), func(b *testing.B) {
			for _, impl := range crashImpls {
				b.Run(impl, func(b *testing.B) {
					res := &crashResult{byDeath: -1}
					for range b.N {
						crashRounds(b, kubeconfig, impl, tm, rounds, delay, res)
					}
					results[tm.String()+" "+impl] = res
					b.ReportMetric(0, "ns/op")
					b.ReportMetric(ms(median(res.crash)), "kill-to-term-median-ms")
					b.ReportMetric(ms(maxOf(res.crash)), "kill-to-term-max-ms")
					b.ReportMetric(ms(median(res.afterReport)), "report-to-term-median-ms")
					b.ReportMetric(ms(maxOf(res.afterReport)), "report-to-term-max-ms")
				})
			}
		})
	}
	if len(results) == len(tms)*len(crashImpls) {
		printCrashTable(os.Stdout, tms, rounds, delay, results)
	}
}

// crashRounds starts a leader, then rounds times: starts a follower, SIGKILLs the
// leader, reports its container terminated, and waits for the follower's term.
func crashRounds(b *testing.B, kubeconfig, impl string, tm timings, rounds int, delay time.Duration, res *crashResult) {
	b.Helper()
	lease := fmt.Sprintf("crash-%s-%d", impl, rand.Uint32())
	n := 0
	next := func() *replica {
		n++
		return startReplica(b, kubeconfig, impl, lease, fmt.Sprintf("%s-%d", lease, n), tm)
	}
	leader := next()
	leader.waitLeading(b, time.Time{}, 2*tm.lease+30*time.Second)
	for range rounds {
		follower := next()
		follower.waitStarted(b)
		// Three renews seen: a state seen on a first look only is waited out by Baton.
		time.Sleep(3*tm.retry + rand.N(tm.retry))
		killed := leader.kill(b)
		time.Sleep(time.Until(killed.Add(delay)))
		written := leader.reportTerminated(b)
		term := follower.waitLeading(b, killed, tm.lease+4*tm.retry+30*time.Second)
		res.crash = append(res.crash, term.Sub(killed))
		res.afterReport = append(res.afterReport, term.Sub(written))
		res.report = append(res.report, written.Sub(killed))
		if impl == implBaton || impl == implBatonDeath {
			res.byDeath = max(res.byDeath, 0) + int(follower.deathTakeovers(b))
		}
		leader = follower
	}
	leader.kill(b)
	switch {
	case impl == implBatonDeath && res.byDeath != len(res.crash):
		b.Errorf("%d of %d takeovers made on the death signal, want all", res.byDeath, len(res.crash))
	case impl == implBaton && res.byDeath != 0:
		b.Errorf("%d takeovers made on the death signal with it off", res.byDeath)
	}
}

// replica is one replica process.
type replica struct {
	id      string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	pod     *corev1.Pod
	termLog string
	stderr  string // file

	started chan struct{} // closed on lineStarted
	stats   chan int64    // lineDeath answers
	exited  chan struct{} // closed once the process was reaped

	// mu guards leading.
	mu      sync.Mutex
	leading []time.Time
}

// startReplica creates the replica's pod, running, and starts its process.
func startReplica(b *testing.B, kubeconfig, impl, lease, id string, tm timings) *replica {
	b.Helper()
	cs := shared.Clientset()
	dir := b.TempDir()
	r := &replica{id: id, termLog: filepath.Join(dir, "termination-log"), stderr: filepath.Join(dir, "stderr"),
		started: make(chan struct{}), stats: make(chan int64, 16), exited: make(chan struct{})}
	pod, err := cs.CoreV1().Pods("default").Create(b.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: crashContainer, Image: "bench"}},
			AutomountServiceAccountToken: new(bool)},
	}, metav1.CreateOptions{})
	if err != nil {
		b.Fatalf("create pod %s: %v", id, err)
	}
	b.Cleanup(func() {
		_ = cs.CoreV1().Pods("default").Delete(context.Background(), id, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	r.pod = r.setStatus(b, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}, pod)

	stderr, err := os.Create(r.stderr)
	if err != nil {
		b.Fatal(err)
	}
	defer stderr.Close()
	r.cmd = exec.Command(os.Args[0], "-test.run=^$")
	r.cmd.Env = append(os.Environ(), childImplEnv+"="+impl, childLeaseEnv+"="+lease, childIdentityEnv+"="+id,
		childKubeconfigEnv+"="+kubeconfig, childTimingsEnv+"="+fmt.Sprintf("%v,%v,%v", tm.lease, tm.renew, tm.retry),
		childTermLogEnv+"="+r.termLog)
	if impl == implBatonDeath {
		r.cmd.Env = append(r.cmd.Env, incarnation.EnvPodNamespace+"=default", incarnation.EnvPodName+"="+id,
			incarnation.EnvPodUID+"="+string(pod.UID), incarnation.EnvContainer+"="+crashContainer)
	}
	r.cmd.Stderr = stderr
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go r.read(stdout)
	b.Cleanup(func() {
		_ = r.stdin.Close()
		_ = r.cmd.Process.Kill()
		<-r.exited
	})
	return r
}

// read takes in the replica's lines until its stdout closes, then reaps it.
func (r *replica) read(stdout io.Reader) {
	defer close(r.exited)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		word, arg, _ := strings.Cut(sc.Text(), " ")
		switch word {
		case lineStarted:
			close(r.started)
		case lineLeading:
			if ns, err := strconv.ParseInt(arg, 10, 64); err == nil {
				r.mu.Lock()
				r.leading = append(r.leading, time.Unix(0, ns))
				r.mu.Unlock()
			}
		case lineDeath:
			if n, err := strconv.ParseInt(arg, 10, 64); err == nil {
				select {
				case r.stats <- n:
				default:
				}
			}
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	_ = r.cmd.Wait()
}

// failf ends the benchmark with the replica's stderr appended.
func (r *replica) failf(b *testing.B, format string, args ...any) {
	b.Helper()
	out, _ := os.ReadFile(r.stderr)
	b.Fatalf("%s: %s\nstderr of %s:\n%s", r.id, fmt.Sprintf(format, args...), r.id, out)
}

func (r *replica) waitStarted(b *testing.B) {
	b.Helper()
	select {
	case <-r.started:
	case <-r.exited:
		r.failf(b, "exited before it started")
	case <-time.After(60 * time.Second):
		r.failf(b, "did not start within 60s")
	}
}

// waitLeading waits up to timeout for a term that started after after and returns its
// start, as the replica reported it.
func (r *replica) waitLeading(b *testing.B, after time.Time, timeout time.Duration) time.Time {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r.mu.Lock()
		for _, t := range r.leading {
			if t.After(after) {
				r.mu.Unlock()
				return t
			}
		}
		r.mu.Unlock()
		select {
		case <-r.exited:
			r.failf(b, "exited while waiting for its term")
		default:
		}
		if time.Now().After(deadline) {
			r.failf(b, "no term within %v", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill SIGKILLs the replica, waits until it is reaped and returns when the signal was
// sent.
func (r *replica) kill(b *testing.B) time.Time {
	b.Helper()
	at := time.Now()
	if err := r.cmd.Process.Kill(); err != nil {
		r.failf(b, "SIGKILL: %v", err)
	}
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		b.Fatalf("%s: not reaped 30s after SIGKILL", r.id)
	}
	return at
}

// reportTerminated plays the kubelet once the container's process is gone: it writes
// the container terminated, with exit code 137 and the termination message file as its
// message, and returns when the write was sent.
func (r *replica) reportTerminated(b *testing.B) time.Time {
	b.Helper()
	msg, err := os.ReadFile(r.termLog)
	if err != nil && !os.IsNotExist(err) {
		b.Fatal(err)
	}
	now := metav1.Now()
	sent := time.Now()
	r.pod = r.setStatus(b, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 137, Reason: "Error", Message: string(msg), StartedAt: now, FinishedAt: now,
		ContainerID: "containerd://" + r.id,
	}}, r.pod)
	return sent
}

// setStatus writes the replica's container state into pod's status.
func (r *replica) setStatus(b *testing.B, state corev1.ContainerState, pod *corev1.Pod) *corev1.Pod {
	b.Helper()
	p := pod.DeepCopy()
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: crashContainer, Image: "bench", State: state}}
	out, err := shared.Clientset().CoreV1().Pods("default").UpdateStatus(b.Context(), p, metav1.UpdateOptions{})
	if err != nil {
		b.Fatalf("update status of pod %s: %v", pod.Name, err)
	}
	return out
}

// deathTakeovers asks the replica for its baton_death_takeovers_total, until it is
// above 0 or for a second (the counter moves just after the term starts).
func (r *replica) deathTakeovers(b *testing.B) int64 {
	b.Helper()
	var n int64
	for deadline := time.Now().Add(time.Second); ; {
		if _, err := io.WriteString(r.stdin, requestStats+"\n"); err != nil {
			r.failf(b, "asking for stats: %v", err)
		}
		select {
		case n = <-r.stats:
		case <-time.After(10 * time.Second):
			r.failf(b, "no answer to %q within 10s", requestStats)
		}
		if n < 0 {
			r.failf(b, "baton_death_takeovers_total not registered")
		}
		if n > 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// printCrashTable writes the figures, each timing's rows side by side, and the ratios
// of the medians.
func printCrashTable(out io.Writer, tms []timings, rounds int, delay time.Duration, rs map[string]*crashResult) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\nCrash failover: the leader process SIGKILLed, %d rounds per row; the next leader's term start as its process reports it.\n", rounds)
	fmt.Fprintf(w, "The kubelet's report: this benchmark writes the killed container's status (terminated, exit code 137, its termination message file as the message) %v after the SIGKILL.\n", delay)
	fmt.Fprintln(w, "timings\timpl\tSIGKILL→term median\tmax\tstatus write→term median\tmax\ttaken on the death signal\tmedian / client-go's")
	for _, tm := range tms {
		base := median(rs[tm.String()+" "+implClientGo].crash)
		for _, impl := range crashImpls {
			r := rs[tm.String()+" "+impl]
			by := "n/a"
			if r.byDeath >= 0 {
				by = fmt.Sprintf("%d of %d", r.byDeath, len(r.crash))
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", tm, impl, fmtD(median(r.crash)), fmtD(maxOf(r.crash)),
				fmtD(median(r.afterReport)), fmtD(maxOf(r.afterReport)), by, ratio(median(r.crash), base))
		}
	}
	for _, tm := range tms {
		death := median(rs[tm.String()+" "+implBatonDeath].crash)
		fmt.Fprintf(w, "%s: median SIGKILL→term of client-go %s, cr-stock %s, baton-cr (no death signal) %s that of baton-cr-death; status write sent at +%s after the SIGKILL (median)\n",
			tm, times(median(rs[tm.String()+" "+implClientGo].crash), death), times(median(rs[tm.String()+" "+implStock].crash), death),
			times(median(rs[tm.String()+" "+implBaton].crash), death), fmtD(median(rs[tm.String()+" "+implBatonDeath].report)))
	}
	w.Flush()
}

// times is a / b as "36.6x"; "n/a" for b zero.
func times(a, b time.Duration) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1fx", float64(a)/float64(b))
}

// ratio is a / b as "0.07x"; "n/a" for b zero.
func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", float64(a)/float64(b))
}
