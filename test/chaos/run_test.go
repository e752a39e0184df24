package chaos

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// apiServer is the server side of the faults: the in-memory server, or the real one
// through what a client can do to it.
type apiServer interface {
	breakWatches() int
	deleteLease() bool
	restore(back int) (from, to string, ok bool)
	restart(d time.Duration)
}

// realServer is a server whose kube-apiserver process the runner can stop and start
// (fRealAPIRestart): each call returns once the process exited or answers again.
type realServer interface {
	stopAPIServer() error
	startAPIServer() error
}

// world is where a history runs.
type world struct {
	srv    apiServer
	mem    *memServer // the in-memory server, for the own-lease check; nil otherwise
	view   func(who string) leaderelection.LeaseStore
	test   string        // the test that runs it, for the replay command
	lease  string        // lease name
	sample time.Duration // 0 in synctest (exact); the belief sampling period otherwise
	slack  time.Duration // added to the recovery bound (scheduling on a real clock)
	kube   bool          // the candidates run in modelled pods with a death watch (kubelet_test.go)
}

// timed is one step of the timeline.
type timed struct {
	at time.Duration
	do func()
}

// runner plays a schedule against candidates.
type runner struct {
	h     *history
	w     world
	cands []*candidate

	outages sync.WaitGroup // real API server restarts in progress

	// mu guards depth and upAt.
	mu    sync.Mutex
	depth map[string]int // open windows per candidate and kind
	upAt  time.Time      // when a restarted real API server last answered again
}

// runHistory plays sched with seed in w and returns the recorded history. It returns
// after every candidate stopped.
func runHistory(seed int64, sched schedule, w world) *history {
	cfg := sched.cfg
	cfg.LeaseName, cfg.LeaseNamespace = w.lease, "default"
	h := &history{
		seed: seed, test: w.test, cfg: cfg, n: sched.n, begin: time.Now(), count: newCounters(),
		srv: w.mem, reg: &register{}, logs: &syncBuffer{}, exact: w.sample == 0,
		sched: sched.lines(), skew: sched.skew,
	}
	if w.kube {
		h.kube = newKubelet(h, seed)
	}
	logger := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: h.relTime}))
	r := &runner{h: h, w: w, depth: make(map[string]int)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range sched.n {
		c := &candidate{
			h: h, idx: i, id: fmt.Sprintf("c%d", i),
			store: newFaultStore(uint64(seed)*31+uint64(i), h.count),
			view:  w.view, release: sched.release[i], logger: logger, sample: w.sample,
			restart: make(chan time.Duration, 1), clock: newSkewClock(), healAt: h.begin.Add(sched.heal),
		}
		r.cands = append(r.cands, c)
		wg.Go(func() { c.run(ctx) })
	}
	r.play(sched)
	h.bound = recoveryBound(cfg) + w.slack
	h.healAt = h.begin.Add(sched.heal)
	// A real restart lasts longer than scheduled (stopping and starting the process
	// take time): the faults are over when the server answers again.
	r.outages.Wait()
	r.mu.Lock()
	if r.upAt.After(h.healAt) {
		h.healAt = r.upAt
	}
	r.mu.Unlock()
	h.checkAt = h.healAt.Add(h.bound)
	time.Sleep(time.Until(h.checkAt))
	r.probe()
	time.Sleep(cfg.LeaseDuration)
	r.probe()
	if h.kube != nil && r.crashLeader() {
		// The report comes within a second of the stop; the next term within
		// deathBound of it, or by the lease rules (which the checker then fails).
		time.Sleep(time.Second + cfg.LeaseDuration + 2*cfg.RetryPeriod)
	}
	cancel()
	wg.Wait()
	return h
}

// recoveryBound is how long after the faults stop one leader must be settled:
// LeaseDuration + 2 × RetryPeriod. A follower takes a lease a LeaseDuration after it
// last saw it renewed, or after it saw it gone or moved back with its last holder
// unknown (every holder here is a Baton elector, whose term ends by its RenewDeadline
// after its last renew); a watch broken at the end of the faults comes back within
// 1.5 × RetryPeriod.
func recoveryBound(cfg leaderelection.Config) time.Duration {
	return cfg.LeaseDuration + 2*cfg.RetryPeriod
}

// relTime prints log times relative to the history's start.
func (h *history) relTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.String("t", h.rel(a.Value.Time()))
	}
	return a
}

// play runs the timeline of sched: each fault at its time, each window closed at its end.
func (r *runner) play(sched schedule) {
	var steps []timed
	for _, f := range sched.faults {
		steps = append(steps, timed{at: f.at, do: func() {
			target := r.resolve(f)
			if end := r.begin(f, target); end != nil {
				r.at(f.at+f.dur, end)
			}
		}})
	}
	r.runSteps(steps)
}

// at runs do at offset from the history's start, in a goroutine of its own.
func (r *runner) at(offset time.Duration, do func()) {
	time.AfterFunc(time.Until(r.h.begin.Add(offset)), do)
}

func (r *runner) runSteps(steps []timed) {
	slices.SortStableFunc(steps, func(a, b timed) int { return cmp.Compare(a.at, b.at) })
	for _, s := range steps {
		time.Sleep(time.Until(r.h.begin.Add(s.at)))
		s.do()
	}
}

// resolve picks the candidate a fault hits: the leader of the moment when it aims at
// the leader (or, with none, one chosen by the fault's time).
func (r *runner) resolve(f fault) int {
	if f.target != leaderTarget {
		return f.target
	}
	for i, c := range r.cands {
		if _, _, leading, _, _ := c.state(); leading {
			return i
		}
	}
	return int(f.at/time.Millisecond) % len(r.cands)
}

// window opens (or, with open false, closes) a window of kind on candidate i and
// reports whether the state changed: windows of one kind on one candidate nest.
func (r *runner) window(kind string, i int, open bool) bool {
	key := fmt.Sprintf("%s/%d", kind, i)
	r.mu.Lock()
	defer r.mu.Unlock()
	if open {
		r.depth[key]++
		return true // a newer window's settings win
	}
	r.depth[key]--
	return r.depth[key] == 0
}

// begin applies f to candidate i and returns what ends it, nil for a point fault.
func (r *runner) begin(f fault, i int) func() {
	c, h := r.cands[i], r.h
	switch f.kind {
	case flakyKind:
		r.window(f.kind, i, true)
		c.store.setFlaky(true, f.flaky)
		h.logFault(f.kind, "%s flaky for %v: %+v", c.id, f.dur, f.flaky)
		return func() {
			if r.window(f.kind, i, false) {
				c.store.setFlaky(false, flakiness{})
				h.logFault(f.kind, "%s flaky ends", c.id)
			}
		}
	case fPartition:
		r.window(f.kind, i, true)
		h.count.add(fPartition, 1)
		c.store.partition(true, f.hang)
		if h.kube != nil {
			h.kube.breakWatches(i, time.Time{})
		}
		h.logFault(f.kind, "%s partitioned for %v (hang %v)", c.id, f.dur, f.hang)
		return func() {
			if r.window(f.kind, i, false) {
				c.store.partition(false, false)
				h.logFault(f.kind, "%s partition heals", c.id)
			}
		}
	case fPause:
		r.window(f.kind, i, true)
		h.count.add(fPause, 1)
		c.store.pause(true)
		h.logFault(f.kind, "%s paused for %v", c.id, f.dur)
		return func() {
			if r.window(f.kind, i, false) {
				c.store.pause(false)
				h.logFault(f.kind, "%s resumes", c.id)
			}
		}
	case fWatchLagged:
		r.window(f.kind, i, true)
		c.store.setLag(f.lag)
		h.logFault(f.kind, "%s watch lags %v for %v", c.id, f.lag, f.dur)
		return func() {
			if r.window(f.kind, i, false) {
				c.store.setLag(0)
				h.logFault(f.kind, "%s watch lag ends", c.id)
			}
		}
	case fSkew:
		r.window(f.kind, i, true)
		h.count.add(fSkew, 1)
		c.clock.setRate(f.rate)
		h.logFault(f.kind, "%s clock runs at rate %.3f for %v", c.id, f.rate, f.dur)
		return func() {
			if r.window(f.kind, i, false) {
				c.clock.setRate(1)
				h.logFault(f.kind, "%s clock back to rate 1", c.id)
			}
		}
	case fCandRestart:
		select {
		case c.restart <- f.dur:
			h.count.add(fCandRestart, 1)
			h.logFault(f.kind, "%s restarts, down %v (release %v)", c.id, f.dur, c.release)
		default:
		}
		return nil
	}
	r.point(f, c)
	return nil
}

// point applies a fault without a window.
func (r *runner) point(f fault, c *candidate) {
	h := r.h
	switch f.kind {
	case fWatchClosed:
		n := c.store.closeWatches()
		h.count.add(fWatchClosed, int64(n))
		h.logFault(f.kind, "closed %d watches of %s", n, c.id)
	case fGone:
		n := r.w.srv.breakWatches()
		if r.w.mem == nil {
			// A client cannot make the real server send 410 Gone: close every
			// candidate's watch as a 410 does (the store closes its channel on it).
			for _, c := range r.cands {
				n += c.store.closeWatches()
			}
		}
		h.count.add(fGone, 1)
		h.logFault(f.kind, "410 Gone: %d watches closed", n)
	case fDeleteAfterCreate:
		if r.w.mem != nil {
			r.w.mem.deleteAfterNextCreate(f.after, func() {
				h.count.add(fLeaseDeleted, 1)
				h.logFault(fLeaseDeleted, "lease deleted %v after a Create", f.after)
			})
		}
	case fLeaseDeleted:
		if r.w.srv.deleteLease() {
			h.count.add(fLeaseDeleted, 1)
			h.logFault(f.kind, "lease deleted")
		}
	case fRestore:
		if from, to, ok := r.w.srv.restore(f.back); ok {
			h.count.add(fRestore, 1)
			h.logFault(f.kind, "restored rv %s over rv %s", to, from)
		}
	case fAPIRestart:
		r.w.srv.restart(f.dur)
		if h.kube != nil {
			h.kube.breakWatches(-1, time.Now().Add(f.dur))
		}
		h.count.add(fAPIRestart, 1)
		h.logFault(f.kind, "api server restarts, down %v", f.dur)
	case fRealAPIRestart:
		r.outages.Go(func() { r.restartReal(f.dur) })
	case fStaleReport:
		if h.kube != nil && h.kube.staleReport(c.idx, int(f.at/time.Millisecond)) {
			h.count.add(fStaleReport, 1)
			h.logFault(f.kind, "the status of %s's pod shows an older incarnation terminated", c.id)
		}
	case fForceDelete:
		if h.kube != nil && h.kube.forceDelete(c.idx) {
			h.count.add(fForceDelete, 1)
			h.logFault(f.kind, "%s's pod force-deleted; its process runs on", c.id)
		}
	case fPodWatchBroken:
		if h.kube != nil {
			h.kube.breakWatches(c.idx, time.Now().Add(f.dur))
			h.count.add(fPodWatchBroken, 1)
			h.logFault(f.kind, "%s's pod watches broken for %v", c.id, f.dur)
		}
	}
}

// restartReal stops the real kube-apiserver and asks it to start again d after the
// stop began (or once it exited, if that took longer: it stops listening at once but
// waits for open watches to end); the outage ends (upAt) once it answers again.
func (r *runner) restartReal(d time.Duration) {
	h := r.h
	srv, ok := r.w.srv.(realServer)
	if !ok {
		h.addErr("%s: the server cannot be restarted", fRealAPIRestart)
		return
	}
	stopAt := time.Now()
	h.logFault(fRealAPIRestart, "kube-apiserver stops, starts again %v later", d)
	if err := srv.stopAPIServer(); err != nil {
		h.addErr("%s: %v", fRealAPIRestart, err)
		return
	}
	h.count.add(fRealAPIRestart, 1)
	h.logFault(fRealAPIRestart, "kube-apiserver exited (stop took %v)", time.Since(stopAt).Round(time.Millisecond))
	time.Sleep(time.Until(stopAt.Add(d)))
	startAt := time.Now()
	err := srv.startAPIServer()
	up := time.Now()
	r.mu.Lock()
	r.upAt = up
	r.mu.Unlock()
	if err != nil {
		h.addErr("%s: %v", fRealAPIRestart, err)
		return
	}
	h.logFault(fRealAPIRestart, "kube-apiserver answers again (start took %v, down %v)",
		up.Sub(startAt).Round(time.Millisecond), up.Sub(stopAt).Round(time.Millisecond))
}

// probe records every candidate's view.
func (r *runner) probe() {
	p := probe{at: time.Now(), terms: make(map[string]uint64), views: make(map[string]string)}
	for _, c := range r.cands {
		who, live, leading, term, leader := c.state()
		if !live {
			p.down = append(p.down, c.id)
			continue
		}
		p.views[c.id] = leader
		if leading {
			p.leaders = append(p.leaders, who)
			p.terms[who] = term
		}
	}
	r.h.mu.Lock()
	r.h.probes = append(r.h.probes, p)
	r.h.mu.Unlock()
}
