package election

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientgoelection "k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/termctx"
)

// candidateEnv carries a JSON candidateConfig to a subprocess candidate.
const candidateEnv = "BATON_ELECTION_CANDIDATE"

const (
	implBaton    = "baton"
	implClientGo = "client-go"
)

// candidateConfig configures a subprocess candidate.
type candidateConfig struct {
	Impl            string        `json:"impl"` // implBaton or implClientGo
	Kubeconfig      string        `json:"kubeconfig"`
	Namespace       string        `json:"namespace"`
	Lease           string        `json:"lease"`
	Identity        string        `json:"identity"`
	LeaseDuration   time.Duration `json:"leaseDuration"`
	RenewDeadline   time.Duration `json:"renewDeadline"`
	RetryPeriod     time.Duration `json:"retryPeriod"`
	ReleaseOnCancel bool          `json:"releaseOnCancel"`
}

// event is one line a subprocess candidate writes on stdout. Times are mtime.
type event struct {
	Ev   string `json:"ev"`
	T    mtime  `json:"t"`
	Term uint64 `json:"term,omitempty"`
	Ep   string `json:"ep,omitempty"`
	// leading, still, ended: the belief certainly held over [From, To].
	// gap: the loop did not run from From to T.
	From mtime `json:"from,omitempty"`
	To   mtime `json:"to,omitempty"`
	// write: the lease write's send time and method (T is the answer's time).
	Sent   mtime  `json:"sent,omitempty"`
	Method string `json:"method,omitempty"`
	// new-leader.
	ID string `json:"id,omitempty"`
	// gap: the first check after it. Leader is IsLeader (client-go: run context
	// live); CtxErr whether the context of the last started term (CtxTerm) had ended.
	Leader  bool   `json:"leader,omitempty"`
	CtxErr  bool   `json:"ctxErr,omitempty"`
	CtxTerm uint64 `json:"ctxTerm,omitempty"`
	// exit, problem.
	Err string `json:"err,omitempty"`
}

// Event kinds.
const (
	evReady        = "ready"
	evBecameLeader = "became-leader" // OnStartedLeading: Term, T
	evStopped      = "stopped"       // OnStoppedLeading: Term of the last started term
	evNewLeader    = "new-leader"
	evWrite        = "write" // a successful lease write (acquire, renew or release)
	evLeading      = "leading"
	evStill        = "still"
	evEnded        = "ended"
	evGap          = "gap"
	evProblem      = "problem"
	evExit         = "exit"
)

// gapThreshold is how long the subprocess's loop must not have run for it to
// report a gap: much more than its 1ms sleep, much less than a SIGSTOP of seconds.
const gapThreshold = 250 * time.Millisecond

// reporter writes events as JSON lines, one Write per line.
type reporter struct {
	mu sync.Mutex
	w  io.Writer
}

func (r *reporter) emit(e event) {
	if e.T == 0 {
		e.T = now()
	}
	b, err := json.Marshal(e)
	if err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.w.Write(append(b, '\n'))
}

// probe is one look at what a candidate believes: lead, the episode and term it
// leads in, and, for the gap report, the last started term's context.
type probe func() (lead bool, episode string, term uint64, ctxErr bool, ctxTerm uint64)

// candidateMain is the subprocess: it runs one candidate until SIGTERM or stdin
// closes, reporting on stdout. It returns the exit code.
func candidateMain() int {
	var cfg candidateConfig
	if err := json.Unmarshal([]byte(os.Getenv(candidateEnv)), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "candidate: bad %s: %v\n", candidateEnv, err)
		return 2
	}
	out := &reporter{w: os.Stdout}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "candidate: kubeconfig: %v\n", err)
		return 2
	}
	log := &requestLog{onWrite: func(w leaseWrite) {
		out.emit(event{Ev: evWrite, T: w.Done, Sent: w.Sent, Method: w.Method})
	}}
	rc.WrapTransport = log.wrap
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		fmt.Fprintf(os.Stderr, "candidate: clientset: %v\n", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		// The parent keeps stdin open; EOF means it is gone or wants us gone.
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()

	var run func(context.Context) error
	var look probe
	switch cfg.Impl {
	case implBaton:
		run, look, err = batonSubprocess(cfg, cs, out)
	case implClientGo:
		run, look, err = clientGoSubprocess(cfg, cs, out)
	default:
		err = fmt.Errorf("unknown impl %q", cfg.Impl)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "candidate: %v\n", err)
		return 2
	}

	loopCtx, stopLoop := context.WithCancel(context.Background())
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		checkLoop(loopCtx, look, out)
	}()
	out.emit(event{Ev: evReady})
	err = run(ctx)
	stopLoop()
	<-loopDone
	e := event{Ev: evExit}
	if err != nil {
		e.Err = err.Error()
	}
	out.emit(e)
	return 0
}

// checkLoop looks at the candidate about every millisecond and reports what it
// believes: leading (first observation of a leadership), still (every 50ms
// while it lasts), ended (first observation after it), and gap (the first look
// after the loop did not run for gapThreshold, e.g. under SIGSTOP).
func checkLoop(ctx context.Context, look probe, out *reporter) {
	var (
		cur       string // episode led at the last look, "" if none
		curTerm   uint64
		lastB     mtime // before-stamp of the last look that saw cur led
		lastStill mtime
	)
	prev := now()
	for ctx.Err() == nil {
		b := now()
		lead, ep, term, ctxErr, ctxTerm := look()
		a := now()
		if gap := b.sub(prev); gap > gapThreshold {
			out.emit(event{Ev: evGap, From: prev, T: b, Leader: lead, Ep: ep, Term: term, CtxErr: ctxErr, CtxTerm: ctxTerm})
		}
		if cur != "" && (!lead || ep != cur) {
			out.emit(event{Ev: evEnded, Ep: cur, Term: curTerm, To: lastB, T: a})
			cur = ""
		}
		if lead {
			if cur == "" {
				cur, curTerm = ep, term
				out.emit(event{Ev: evLeading, Ep: ep, Term: term, From: a, To: b})
				lastStill = b
			}
			lastB = b
			if b.sub(lastStill) >= 50*time.Millisecond {
				out.emit(event{Ev: evStill, Ep: ep, Term: term, To: b})
				lastStill = b
			}
		}
		prev = a
		time.Sleep(time.Millisecond)
	}
}

// batonSubprocess builds the Baton elector of a subprocess.
func batonSubprocess(cfg candidateConfig, cs kubernetes.Interface, out *reporter) (func(context.Context) error, probe, error) {
	var (
		// last is the context of the last started term.
		last atomic.Pointer[context.Context]
	)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	el, err := leaderelection.New(leaderelection.Config{
		Identity:        cfg.Identity,
		LeaseName:       cfg.Lease,
		LeaseNamespace:  cfg.Namespace,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: cfg.ReleaseOnCancel,
	}, cs, leaderelection.Callbacks{
		OnStartedLeading: func(ctx context.Context) {
			term, _ := termctx.FromContext(ctx)
			last.Store(&ctx)
			out.emit(event{Ev: evBecameLeader, Term: term})
			<-ctx.Done()
		},
		OnStoppedLeading: func() {
			var term uint64
			if p := last.Load(); p != nil {
				term, _ = termctx.FromContext(*p)
				if (*p).Err() == nil {
					out.emit(event{Ev: evProblem, Err: fmt.Sprintf("OnStoppedLeading ran while term %d's context was live", term)})
				}
			}
			out.emit(event{Ev: evStopped, Term: term})
		},
		OnNewLeader: func(id string) { out.emit(event{Ev: evNewLeader, ID: id}) },
	}, logger)
	if err != nil {
		return nil, nil, err
	}
	look := func() (bool, string, uint64, bool, uint64) {
		lead := el.IsLeader()
		term := el.Term()
		var ctxErr bool
		var ctxTerm uint64
		if p := last.Load(); p != nil {
			ctxErr = (*p).Err() != nil
			ctxTerm, _ = termctx.FromContext(*p)
		}
		if !lead || term == 0 {
			return false, "", 0, ctxErr, ctxTerm
		}
		return true, episodeOfTerm(term), term, ctxErr, ctxTerm
	}
	return el.Start, look, nil
}

// clientGoSubprocess builds client-go's stock elector of a subprocess, run in a
// loop (its Run returns when it loses the lease).
func clientGoSubprocess(cfg candidateConfig, cs kubernetes.Interface, out *reporter) (func(context.Context) error, probe, error) {
	type run struct {
		n   int
		ctx context.Context
	}
	var cur atomic.Pointer[run]
	var runs atomic.Int64
	lec := clientgoelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: cfg.Lease, Namespace: cfg.Namespace},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
		},
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: cfg.ReleaseOnCancel,
		Name:            cfg.Identity,
		Callbacks: clientgoelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				r := &run{n: int(runs.Add(1)), ctx: ctx}
				cur.Store(r)
				out.emit(event{Ev: evBecameLeader, Ep: fmt.Sprintf("run %d", r.n)})
			},
			OnStoppedLeading: func() { out.emit(event{Ev: evStopped}) },
			OnNewLeader:      func(id string) { out.emit(event{Ev: evNewLeader, ID: id}) },
		},
	}
	if _, err := clientgoelection.NewLeaderElector(lec); err != nil {
		return nil, nil, err
	}
	start := func(ctx context.Context) error {
		for ctx.Err() == nil {
			le, err := clientgoelection.NewLeaderElector(lec)
			if err != nil {
				return err
			}
			le.Run(ctx)
		}
		return nil
	}
	look := func() (bool, string, uint64, bool, uint64) {
		r := cur.Load()
		if r == nil {
			return false, "", 0, false, 0
		}
		alive := r.ctx.Err() == nil
		if !alive {
			return false, "", 0, true, 0
		}
		return true, fmt.Sprintf("run %d", r.n), 0, false, 0
	}
	return start, look, nil
}

// child is a subprocess candidate seen from the test.
type child struct {
	who    string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *lockedBuffer
	m      *monitor
	exited chan struct{} // closed after stdout hit EOF and the process was waited for

	// waitErr is the process's exit error, set before exited is closed.
	waitErr error

	// mu guards events.
	mu     sync.Mutex
	events []event
}

// spawn starts a subprocess candidate running this test binary; the test's
// cleanup stops it (stdin closed, then SIGKILL after 20s) and fails the test on
// a data race reported by the subprocess.
func (h *harness) spawn(cfg candidateConfig) *child {
	t := h.t
	t.Helper()
	if cfg.Namespace == "" {
		cfg.Namespace = namespace
	}
	if cfg.Kubeconfig == "" {
		cfg.Kubeconfig = h.env.Kubeconfig(t)
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), candidateEnv+"="+string(js))
	cmd.SysProcAttr = candidateProcAttr()
	c := &child{who: cfg.Identity, cmd: cmd, stderr: &lockedBuffer{}, m: h.m, exited: make(chan struct{})}
	cmd.Stderr = c.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start candidate %s: %v", cfg.Identity, err)
	}
	go c.read(stdout)
	t.Cleanup(func() {
		_ = c.stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			<-c.exited
		}
		if strings.Contains(c.stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("candidate %s reported a data race", c.who)
		}
		if t.Failed() {
			t.Logf("stderr of candidate %s:\n%s", c.who, c.stderr.String())
		}
	})
	return c
}

func (c *child) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			c.m.problem("candidate %s wrote a line that is not an event: %q", c.who, sc.Text())
			continue
		}
		switch e.Ev {
		case evLeading:
			c.m.leading(c.who, e.Ep, e.Term, e.To, e.From)
		case evStill:
			c.m.leading(c.who, e.Ep, e.Term, e.To, 0)
		case evEnded:
			c.m.leading(c.who, e.Ep, e.Term, e.To, 0)
			c.m.ended(c.who, e.Ep, e.T)
		case evProblem:
			c.m.problem("candidate %s: %s", c.who, e.Err)
		}
		c.mu.Lock()
		c.events = append(c.events, e)
		c.mu.Unlock()
	}
	c.waitErr = c.cmd.Wait()
	close(c.exited)
}

// find returns the first event that matches.
func (c *child) find(match func(event) bool) (event, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.events {
		if match(e) {
			return e, true
		}
	}
	return event{}, false
}

// all returns the events that match.
func (c *child) all(match func(event) bool) []event {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []event
	for _, e := range c.events {
		if match(e) {
			out = append(out, e)
		}
	}
	return out
}

// await waits for the first event that matches.
func (c *child) await(t testing.TB, timeout time.Duration, what string, match func(event) bool) event {
	t.Helper()
	var got event
	waitFor(t, timeout, fmt.Sprintf("candidate %s: %s", c.who, what), func() bool {
		var ok bool
		got, ok = c.find(match)
		return ok
	})
	return got
}

// lastWrite returns the candidate's last successful lease write.
func (c *child) lastWrite() (event, bool) {
	ws := c.all(func(e event) bool { return e.Ev == evWrite })
	if len(ws) == 0 {
		return event{}, false
	}
	return ws[len(ws)-1], true
}

func (c *child) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to candidate %s: %v", sig, c.who, err)
	}
}

// waitExit waits for the process to end and returns its exit error.
func (c *child) waitExit(t testing.TB, timeout time.Duration) error {
	t.Helper()
	select {
	case <-c.exited:
		return c.waitErr
	case <-time.After(timeout):
		t.Fatalf("candidate %s did not exit within %v", c.who, timeout)
		return nil
	}
}

func isEv(kind string) func(event) bool { return func(e event) bool { return e.Ev == kind } }
