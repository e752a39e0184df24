package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/leaderelection"
)

// Fault is a way of failing the leader.
type Fault string

// Faults.
const (
	FaultKill    Fault = "kill"
	FaultPause   Fault = "pause"
	FaultRelease Fault = "release"
)

// Defaults of Options.
const (
	DefaultReplicas        = 3
	DefaultFailovers       = 6
	DefaultLeaseDuration   = time.Second
	DefaultRenewDeadline   = 700 * time.Millisecond
	DefaultRetryPeriod     = 200 * time.Millisecond
	DefaultDwell           = 2500 * time.Millisecond
	DefaultRefreshInterval = 100 * time.Millisecond
)

// ErrInvalidOptions is wrapped by Run for options it cannot use; the
// message names the field.
var ErrInvalidOptions = errors.New("demo: invalid options")

// Options configure Run. Zero values take the defaults written on each
// field.
type Options struct {
	// Replicas is the number of replicas, at least 2; 0 means 3.
	Replicas int
	// Failovers is the number of leader failures; 0 means 6, negative
	// runs none (start, elect, stop).
	Failovers int
	// LeaseDuration, RenewDeadline and RetryPeriod are the election's
	// timings; zero means 1s, 700ms and 200ms.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Dwell is how long a leader leads between failovers; 0 means 2.5s,
	// negative none.
	Dwell time.Duration
	// Seed draws the order of the faults and the changes made to the
	// configuration and the pods.
	Seed uint64
	// Out receives the live view or the log lines, and the per-failover
	// lines; nil discards them.
	Out io.Writer
	// Live redraws Out in place with ANSI escapes (for a terminal) instead
	// of printing log lines.
	Live bool
	// RefreshInterval is the live view's redraw interval; 0 means 100ms.
	RefreshInterval time.Duration
	// StepTimeout bounds each wait of the run (for a leader, for a sync);
	// 0 means 10 lease durations, at least 5s.
	StepTimeout time.Duration
	// Logger receives the replicas' own log lines; nil discards them.
	Logger *slog.Logger
	// Metrics, if set, gets each replica's /metrics, /healthz and /readyz
	// handler under its name as the replica starts.
	Metrics *Mux
}

func (o Options) withDefaults() (Options, error) {
	if o.Replicas == 0 {
		o.Replicas = DefaultReplicas
	}
	if o.Failovers == 0 {
		o.Failovers = DefaultFailovers
	}
	if o.Failovers < 0 {
		o.Failovers = 0
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = DefaultRenewDeadline
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = DefaultRetryPeriod
	}
	if o.Dwell == 0 {
		o.Dwell = DefaultDwell
	}
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = DefaultRefreshInterval
	}
	if o.StepTimeout == 0 {
		o.StepTimeout = max(10*o.LeaseDuration, 5*time.Second)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	if o.Replicas < 2 {
		errs = append(errs, fmt.Errorf("%w: replicas %d: need at least 2 for a failover", ErrInvalidOptions, o.Replicas))
	}
	if o.StepTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: stepTimeout %v is negative", ErrInvalidOptions, o.StepTimeout))
	}
	// The election checks its own timings; report them here, by name, too.
	if o.LeaseDuration <= o.RenewDeadline {
		errs = append(errs, fmt.Errorf("%w: leaseDuration %v must be greater than renewDeadline %v", ErrInvalidOptions, o.LeaseDuration, o.RenewDeadline))
	}
	if o.RenewDeadline <= o.RetryPeriod*6/5 {
		errs = append(errs, fmt.Errorf("%w: renewDeadline %v must be greater than 1.2 × retryPeriod %v", ErrInvalidOptions, o.RenewDeadline, o.RetryPeriod))
	}
	return o, errors.Join(errs...)
}

// Schedule returns the faults of n failovers drawn from seed: cycles of the
// three faults, each in a shuffled order, never the same fault twice in a
// row.
func Schedule(seed uint64, n int) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var out []Fault
	for len(out) < n {
		cycle := []Fault{FaultKill, FaultPause, FaultRelease}
		rng.Shuffle(len(cycle), func(i, j int) { cycle[i], cycle[j] = cycle[j], cycle[i] })
		if len(out) > 0 && cycle[0] == out[len(out)-1] {
			cycle[0], cycle[2] = cycle[2], cycle[0]
		}
		out = append(out, cycle...)
	}
	return out[:n]
}

// engine is one run.
type engine struct {
	ctx   context.Context
	opts  Options
	rng   *rand.Rand
	world *world
	rec   *recorder
	view  *view
	start time.Time

	// mu guards the fields below.
	mu    sync.Mutex
	nodes []*node // the current incarnation of each replica, by slot
	all   []*node // every incarnation started
}

// Run runs the demo until its failovers are done or ctx ends, and returns
// its report. The error is for options it cannot use or a replica it could
// not build; failed checks are in the report (Report.OK).
func Run(ctx context.Context, opts Options) (*Report, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &engine{ctx: ctx, opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, 1)), start: time.Now()}
	e.view = newView(opts.Out, opts.Live, e.start)
	e.rec = newRecorder(e.view.logf)
	if e.world, err = newWorld(e.rng); err != nil {
		return nil, err
	}
	rep := &Report{Options: opts, Started: e.start}
	rep.Options.Out, rep.Options.Logger, rep.Options.Metrics = nil, nil, nil

	stopView := e.runView()
	defer stopView() // after stopAll: deferred calls run last first
	defer e.stopAll()

	for i := range opts.Replicas {
		id := fmt.Sprintf("baton-%d", i)
		n, err := e.startNode(id, 1)
		if err != nil {
			return nil, err
		}
		e.mu.Lock()
		e.nodes = append(e.nodes, n)
		e.all = append(e.all, n)
		e.mu.Unlock()
		rep.Replicas = append(rep.Replicas, id)
	}
	e.view.logf("started %d replicas on one in-memory lease; faults in order: %s", opts.Replicas, joinFaults(Schedule(opts.Seed, opts.Failovers)))
	e.view.setStep("electing a first leader")
	if _, _, ok := e.waitLeader(0); !ok {
		rep.Aborted = "no first leader was elected within " + opts.StepTimeout.String()
	}
	invalidAt := -1
	if opts.Failovers >= 2 {
		invalidAt = 1 + e.rng.IntN(opts.Failovers-1)
	}
	for i, fault := range Schedule(opts.Seed, opts.Failovers) {
		if rep.Aborted != "" {
			break
		}
		f, abort := e.failover(i, fault, i == invalidAt)
		rep.Failovers = append(rep.Failovers, f)
		e.view.logf("%s", f.line(opts.Failovers))
		if abort != "" {
			rep.Aborted = abort
		}
	}
	if rep.Aborted == "" && ctx.Err() != nil {
		rep.Aborted = "interrupted"
	}
	e.view.setStep("stopping")
	rep.Global = e.globalChecks(true)
	e.stopAll()
	rep.Global = append(rep.Global, e.globalChecks(false)...)
	e.view.setStep("done")
	stopView()
	rep.LostLogLines = e.view.lostLines()
	rep.Terms = e.rec.snapshot(e.incarnations())
	rep.Marks = e.rec.allMarks()
	rep.Duration = time.Since(e.start)
	return rep, nil
}

func joinFaults(fs []Fault) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// runView starts the view's goroutine: the printer of the log lines, or
// the live view's redraws. The returned func stops it (for the live view,
// after drawing the last frame) and waits for it; call it once the replicas
// stopped logging.
func (e *engine) runView() func() {
	var wg sync.WaitGroup
	stop := make(chan struct{})
	if e.opts.Live {
		wg.Go(func() {
			t := time.NewTicker(e.opts.RefreshInterval)
			defer t.Stop()
			for {
				e.view.draw(e.frame())
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		})
	} else {
		wg.Go(e.view.printLines)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			e.view.closeLines()
			wg.Wait()
			if e.opts.Live {
				e.view.draw(e.frame())
			}
		})
	}
}

// current returns the current incarnation of each replica.
func (e *engine) current() []*node {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.nodes)
}

func (e *engine) incarnations() []*incarnation {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*incarnation, len(e.all))
	for i, n := range e.all {
		out[i] = n.inc
	}
	return out
}

// replace makes n the current incarnation of its replica.
func (e *engine) replace(old, n *node) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, c := range e.nodes {
		if c == old {
			e.nodes[i] = n
		}
	}
	e.all = append(e.all, n)
}

// stopAll stops every incarnation still running; it is idempotent.
func (e *engine) stopAll() {
	e.mu.Lock()
	all := slices.Clone(e.all)
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range all {
		wg.Go(n.stop)
	}
	wg.Wait()
}

// waitFor polls cond until it holds; false when StepTimeout passed or the
// run's context ended.
func (e *engine) waitFor(cond func() bool) bool {
	deadline := time.Now().Add(e.opts.StepTimeout)
	for {
		if cond() {
			return true
		}
		if e.ctx.Err() != nil || time.Now().After(deadline) {
			return false
		}
		select {
		case <-e.ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// sleep waits d, or until the run's context ends.
func (e *engine) sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-e.ctx.Done():
	case <-t.C:
	}
}

// waitLeader waits for exactly one live replica to lead, with its term
// ready, in a term above after, and for that term's first publish.
func (e *engine) waitLeader(after uint64) (*node, uint64, bool) {
	var leader *node
	var term uint64
	ok := e.waitFor(func() bool {
		leader, term = nil, 0
		count := 0
		for _, n := range e.current() {
			if t, ok := n.leading(); ok && t > after {
				leader, term = n, t
				count++
			}
		}
		return count == 1
	})
	return leader, term, ok
}

// synced waits until every node's all-replica side holds the world's
// newest state.
func (e *engine) synced(nodes []*node) bool {
	want := e.world.newest()
	return e.waitFor(func() bool {
		for _, n := range nodes {
			if !holdsNewest(n, want) {
				return false
			}
		}
		return true
	})
}

// holdsNewest reports whether n's all-replica side holds want. A replica
// started while the newest document is invalid has never seen a valid one:
// it holds the newest state when it holds the refusal.
func holdsNewest(n *node, want newest) bool {
	h := n.r.ConfigHandler()
	st := h.Stats()
	if want.Invalid && (!st.CurrentInvalid || st.LastInvalidVersion != want.InvalidVersion) {
		return false
	}
	switch cfg, ok := h.Current(); {
	case ok && cfg.Version != want.ConfigVersion:
		return false
	case !ok && (!want.Invalid || st.Validated > 0):
		return false
	}
	pods, ok := n.r.Discovery().Current()
	return ok && slices.Equal(pods.Pods, want.Pods)
}

func (e *engine) published() (configpublisher.Published, error) {
	o, err := e.world.e.Published.Get(context.Background())
	if err != nil {
		return configpublisher.Published{}, err
	}
	return configpublisher.Decode(o)
}

// live returns the current nodes that run and are not paused, but not
// except.
func (e *engine) liveNodes(except *node) []*node {
	var out []*node
	for _, n := range e.current() {
		if n != except && n.live() {
			out = append(out, n)
		}
	}
	return out
}

// change makes a world change and logs and marks it.
func (e *engine) change(kind string, do func() (string, error)) error {
	what, err := do()
	if err != nil {
		return err
	}
	e.rec.mark(Mark{At: time.Now(), Kind: kind, Text: what})
	e.view.logf("world: %s", what)
	return nil
}

func (e *engine) changeConfig(valid bool) error {
	kind := MarkConfig
	if !valid {
		kind = MarkInvalid
	}
	return e.change(kind, func() (string, error) { return e.world.changeConfig(valid) })
}

func (e *engine) changePods() error { return e.change(MarkPods, e.world.changePods) }

// failover runs one failover and checks it; abort is set when the run
// cannot go on (no leader).
func (e *engine) failover(i int, fault Fault, invalid bool) (f Failover, abort string) {
	o := e.opts
	f = Failover{N: i + 1, Fault: fault, InvalidConfig: invalid}
	fail := func(name, format string, args ...any) {
		f.Checks = append(f.Checks, Check{Name: name, Detail: fmt.Sprintf(format, args...)})
	}
	old, oldTerm, ok := e.waitLeader(0)
	if !ok {
		fail("leader before the fault", "no single ready leader within %v", o.StepTimeout)
		return f, "no leader"
	}
	f.From, f.OldTerm = old.id, oldTerm

	// The leader leads for a while; the pods change under it.
	e.view.setStep("failover %d/%d: %s leads term %d; pods change under it", f.N, o.Failovers, old.id, oldTerm)
	if err := e.changePods(); err != nil {
		fail("world change", "%v", err)
		return f, err.Error()
	}
	want := e.world.newest()
	gen := func(n *node) uint64 {
		cur, _ := n.r.Discovery().Current()
		return cur.Generation
	}
	f.Checks = append(f.Checks, check("live change published",
		e.waitFor(func() bool {
			p, err := e.published()
			return err == nil && holdsNewest(old, want) && p.Term == oldTerm && p.PodGeneration == gen(old)
		}), "the leader did not publish the pods change of its own term"))
	e.sleep(o.Dwell)

	// Changes just before the fault, on every replica.
	if err := e.changeConfig(!invalid); err != nil {
		fail("world change", "%v", err)
		return f, err.Error()
	}
	if err := e.changePods(); err != nil {
		fail("world change", "%v", err)
		return f, err.Error()
	}
	if !e.synced(e.liveNodes(nil)) {
		fail("replicas synced", "the all-replica side did not take the changes within %v", o.StepTimeout)
	}

	// The fault.
	e.view.setStep("failover %d/%d: %s %s (term %d)", f.N, o.Failovers, fault, old.id, oldTerm)
	f.FaultAt = time.Now()
	switch fault {
	case FaultKill:
		e.rec.mark(Mark{At: f.FaultAt, Kind: MarkKill, Replica: old.id, Term: oldTerm, Text: "killed"})
		e.view.logf("failover %d: killing %s (term %d): its stores fail from now on; the lease is left held", f.N, old.id, oldTerm)
		old.kill()
	case FaultPause:
		e.rec.mark(Mark{At: f.FaultAt, Kind: MarkPause, Replica: old.id, Term: oldTerm, Text: "paused"})
		e.view.logf("failover %d: pausing %s (term %d) for %v: its store calls hang", f.N, old.id, oldTerm, o.LeaseDuration+o.RenewDeadline)
		old.gate.pause()
	case FaultRelease:
		e.rec.mark(Mark{At: f.FaultAt, Kind: MarkRelease, Replica: old.id, Term: oldTerm, Text: "released"})
		e.view.logf("failover %d: stopping %s (term %d) gracefully: it releases the lease", f.N, old.id, oldTerm)
		old.release()
	}
	// While nobody leads (kill, pause), the world changes again: the next
	// leader can only learn it through its own all-replica side and the
	// replays.
	if fault != FaultRelease {
		if !invalid {
			if err := e.changeConfig(true); err != nil {
				fail("world change", "%v", err)
				return f, err.Error()
			}
		}
		if err := e.changePods(); err != nil {
			fail("world change", "%v", err)
			return f, err.Error()
		}
		if !e.synced(e.liveNodes(old)) {
			fail("replicas synced", "the all-replica side did not take the changes made while nobody led within %v", o.StepTimeout)
		}
	}
	want = e.world.newest()

	// The new leader.
	e.view.setStep("failover %d/%d: %s %s; waiting for a new leader", f.N, o.Failovers, fault, old.id)
	nl, newTerm, ok := e.waitLeader(oldTerm)
	if !ok {
		fail("new leader elected", "no single ready leader above term %d within %v", oldTerm, o.StepTimeout)
		if fault == FaultPause {
			old.gate.resume()
		}
		return f, "no new leader"
	}
	f.To, f.NewTerm = nl.id, newTerm
	f.ConfigVersion, f.PodGeneration = want.ConfigVersion, gen(nl)
	e.view.setStep("failover %d/%d: %s leads term %d; checking", f.N, o.Failovers, nl.id, newTerm)
	// The first render, and the object published from it (a term may first
	// publish only a status, before its first render).
	e.waitFor(func() bool {
		t, ok := e.rec.term(newTerm, e.incarnations())
		p, err := e.published()
		return ok && t.FirstRender != nil && err == nil && p.Term == newTerm &&
			p.ConfigVersion == want.ConfigVersion && p.PodGeneration == f.PodGeneration
	})
	f.Checks = append(f.Checks, e.checkNewLeader(&f, old, nl, want)...)

	switch fault {
	case FaultPause:
		e.sleep(time.Until(f.FaultAt.Add(o.LeaseDuration + o.RenewDeadline)))
		e.rec.mark(Mark{At: time.Now(), Kind: MarkResume, Replica: old.id, Term: oldTerm, Text: "resumed"})
		e.view.logf("failover %d: resuming %s; it must find its term %d over", f.N, old.id, oldTerm)
		old.gate.resume()
		f.Checks = append(f.Checks, e.checkResumed(old, oldTerm, newTerm)...)
	default:
		n, err := e.startNode(old.id, old.inc.n+1)
		if err != nil {
			fail("restart", "%v", err)
			return f, err.Error()
		}
		e.replace(old, n)
		e.rec.mark(Mark{At: time.Now(), Kind: MarkRestart, Replica: n.id, Text: "restarted"})
		e.view.logf("failover %d: restarted %s as a fresh follower", f.N, n.id)
		f.Checks = append(f.Checks, check("restarted replica synced", e.synced([]*node{n}),
			"%s did not sync within %v", n.id, o.StepTimeout))
	}
	return f, ""
}

func check(name string, ok bool, format string, args ...any) Check {
	c := Check{Name: name, OK: ok}
	if !ok {
		c.Detail = fmt.Sprintf(format, args...)
	}
	return c
}

// checkNewLeader checks the hand-over from old to nl.
func (e *engine) checkNewLeader(f *Failover, old, nl *node, want newest) []Check {
	var cs []Check
	add := func(name string, ok bool, format string, args ...any) {
		cs = append(cs, check(name, ok, format, args...))
	}
	incs := e.incarnations()
	ot, _ := e.rec.term(f.OldTerm, incs)
	nt, _ := e.rec.term(f.NewTerm, incs)

	add("term increased", f.NewTerm > f.OldTerm, "new term %d is not above %d", f.NewTerm, f.OldTerm)
	add("no overlap with the old term", !ot.End.IsZero() && !ot.End.After(nt.Sent),
		"old term %d ended %s, new term %d's acquisition was sent %s", f.OldTerm, e.at(ot.End), f.NewTerm, e.at(nt.Sent))
	f.Handover = nt.Sent.Sub(f.FaultAt)
	if !ot.End.IsZero() {
		f.Gap = nt.Sent.Sub(ot.End)
	}
	add("term ready", !nt.Ready.IsZero(), "term %d never became ready", f.NewTerm)
	f.TermReady = nt.ReadyLatency

	// What the leader-only side holds.
	gen := f.PodGeneration
	cur, _ := nl.r.Discovery().Current()
	add("leader's discovery newest", cur != nil && slices.Equal(cur.Pods, want.Pods), "%s's discovery does not hold the newest pods", nl.id)
	pub, sched, coord := nl.r.Publisher().State(), nl.r.Scheduler().State(), nl.r.Coordinator().Status()
	var stale []string
	if pub.Term != f.NewTerm || pub.ConfigVersion != want.ConfigVersion || pub.PodGeneration != gen || pub.Invalid != want.Invalid {
		stale = append(stale, fmt.Sprintf("publisher t%d %s/g%d invalid=%v", pub.Term, short(pub.ConfigVersion), pub.PodGeneration, pub.Invalid))
	}
	if sched.Term != f.NewTerm || sched.ConfigVersion != want.ConfigVersion || sched.PodGeneration != gen ||
		sched.Last.ConfigVersion != want.ConfigVersion || sched.Last.PodGeneration != gen {
		stale = append(stale, fmt.Sprintf("scheduler t%d %s/g%d deployed %s/g%d", sched.Term, short(sched.ConfigVersion), sched.PodGeneration, short(sched.Last.ConfigVersion), sched.Last.PodGeneration))
	}
	if coord.Term != f.NewTerm || coord.ConfigVersion != want.ConfigVersion || coord.PodGeneration != gen {
		stale = append(stale, fmt.Sprintf("coordinator t%d %s/g%d", coord.Term, short(coord.ConfigVersion), coord.PodGeneration))
	}
	add("leader-only state newest", len(stale) == 0, "want config %s pods g%d: %s", short(want.ConfigVersion), gen, strings.Join(stale, "; "))

	// The first render.
	r := nt.FirstRender
	if r == nil {
		add("first render newest", false, "no render in term %d", f.NewTerm)
	} else {
		f.FirstRender = nt.RenderAt.Sub(nt.Acquired)
		var bad []string
		if r.Term != f.NewTerm || r.ConfigVersion != want.ConfigVersion || r.PodGeneration != gen {
			bad = append(bad, fmt.Sprintf("rendered from t%d %s/g%d", r.Term, short(r.ConfigVersion), r.PodGeneration))
		}
		ready, notReady := want.readyIPs()
		for _, ip := range ready {
			if !strings.Contains(r.Output, " "+ip+":8080 ") {
				bad = append(bad, "no server "+ip)
			}
		}
		for _, ip := range notReady {
			if strings.Contains(r.Output, " "+ip+":8080 ") {
				bad = append(bad, "a server for not-ready "+ip)
			}
		}
		add("first render newest", len(bad) == 0, "want %s/g%d with %d servers: %s", short(want.ConfigVersion), gen, len(ready), strings.Join(bad, "; "))
	}

	// The published object.
	p, err := e.published()
	switch {
	case err != nil:
		add("published by the new term", false, "%v", err)
	default:
		var bad []string
		if p.Term != f.NewTerm || p.PublishedBy != nl.id {
			bad = append(bad, fmt.Sprintf("term %d by %s", p.Term, p.PublishedBy))
		}
		if p.ConfigVersion != want.ConfigVersion || p.PodGeneration != gen {
			bad = append(bad, fmt.Sprintf("content %s/g%d", short(p.ConfigVersion), p.PodGeneration))
		}
		// The content is the render of that state.
		out, _ := want.readyIPs()
		for _, ip := range out {
			if !strings.Contains(p.Data[configpublisher.KeyRendered], " "+ip+":8080 ") {
				bad = append(bad, "the published render has no server "+ip)
			}
		}
		if want.Invalid {
			if p.Status != configpublisher.StatusInvalid || p.InvalidVersion != want.InvalidVersion || !strings.Contains(strings.Join(p.Reasons, "\n"), "backends[0].port") {
				bad = append(bad, fmt.Sprintf("status %s %v, want invalid naming backends[0].port", p.Status, p.Reasons))
			}
		} else if p.Status != configpublisher.StatusValid {
			bad = append(bad, fmt.Sprintf("status %s %v", p.Status, p.Reasons))
		}
		add("published by the new term", len(bad) == 0, "%s", strings.Join(bad, "; "))
	}

	// Fencing: a write with the old term must be refused.
	before, _ := e.world.e.Published.Get(context.Background())
	_, err = configpublisher.Write(context.Background(), e.world.e.Published, configpublisher.Record{
		Term: f.OldTerm, Identity: old.id, Status: configpublisher.StatusValid,
		Content: &configpublisher.Payload{Data: map[string]string{"stale": "a write from the old term"}, ConfigVersion: "stale"},
	})
	after, _ := e.world.e.Published.Get(context.Background())
	f.Fenced = errors.Is(err, configpublisher.ErrStaleTerm) && after.ResourceVersion == before.ResourceVersion
	add("old term fenced", f.Fenced, "a write with term %d returned %v (object %s -> %s)", f.OldTerm, err, before.ResourceVersion, after.ResourceVersion)

	// The kind of takeover.
	wantFrom := old.id
	if f.Fault == FaultRelease {
		wantFrom = ""
	}
	add("takeover as expected", nt.TakeoverKnown && nt.TakeoverFrom == wantFrom,
		"the acquiring write saw holder %q, want %q (%s)", nt.TakeoverFrom, wantFrom, map[bool]string{true: "released lease", false: "expired lease"}[wantFrom == ""])
	f.Newest = true
	for _, c := range cs {
		if !c.OK && (c.Name == "leader-only state newest" || c.Name == "first render newest" || c.Name == "published by the new term" || c.Name == "leader's discovery newest") {
			f.Newest = false
		}
	}
	return cs
}

// checkResumed checks a paused leader after it resumed.
func (e *engine) checkResumed(old *node, oldTerm, newTerm uint64) []Check {
	stepped := e.waitFor(func() bool {
		t, _ := e.rec.term(oldTerm, e.incarnations())
		return t.LostReason != "" && !old.r.Manager().Status().Leading && !old.r.Elector().IsLeader()
	})
	t, _ := e.rec.term(oldTerm, e.incarnations())
	p, err := e.published()
	return []Check{
		check("paused leader found its term over", stepped && t.LostReason == leaderelection.ReasonRenewDeadlineMissed,
			"%s: term %d lost with reason %q (stepped down: %v)", old.id, oldTerm, t.LostReason, stepped),
		check("paused leader wrote nothing", err == nil && p.Term == newTerm,
			"published object after the resume: term %d by %s (%v)", p.Term, p.PublishedBy, err),
	}
}

// globalChecks checks the whole run: while running is true, what must hold
// of the replicas still running; after they stopped, the terms.
func (e *engine) globalChecks(running bool) []Check {
	if running {
		var sick []string
		for _, n := range e.current() {
			if !n.live() {
				continue
			}
			if err := n.r.Healthy(); err != nil {
				sick = append(sick, n.id+": "+err.Error())
			}
		}
		return []Check{check("live replicas healthy", len(sick) == 0, "%s", strings.Join(sick, "; "))}
	}
	terms := e.rec.snapshot(e.incarnations())
	var overlaps, order []string
	for i := 1; i < len(terms); i++ {
		prev, cur := terms[i-1], terms[i]
		if prev.End.IsZero() || prev.End.After(cur.Sent) {
			overlaps = append(overlaps, fmt.Sprintf("term %d (%s) ended %s after term %d (%s) was acquired at %s",
				prev.Term, prev.Replica, e.at(prev.End), cur.Term, cur.Replica, e.at(cur.Sent)))
		}
		if cur.Term <= prev.Term {
			order = append(order, fmt.Sprintf("term %d acquired after term %d", cur.Term, prev.Term))
		}
	}
	var runErrs []string
	e.mu.Lock()
	all := slices.Clone(e.all)
	e.mu.Unlock()
	for _, n := range all {
		if err := n.err(); err != nil && !n.wasKilled() {
			runErrs = append(runErrs, n.id+": "+err.Error())
		}
	}
	return []Check{
		check(fmt.Sprintf("no two replicas led at once (%d terms)", len(terms)), len(overlaps) == 0, "%s", strings.Join(overlaps, "; ")),
		check("terms strictly increasing", len(order) == 0, "%s", strings.Join(order, "; ")),
		check("observers lost no events", e.rec.droppedEvents() == 0, "%d events dropped", e.rec.droppedEvents()),
		check("replicas stopped cleanly", len(runErrs) == 0, "%s", strings.Join(runErrs, "; ")),
	}
}

// at formats a moment as the time since the run started.
func (e *engine) at(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return fmt.Sprintf("%.3fs", t.Sub(e.start).Seconds())
}
