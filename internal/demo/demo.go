package demo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/pkg/controller/configpublisher"
)

// engine is one run.
type engine struct {
	ctx   context.Context
	opts  Options
	rng   *rand.Rand
	world *world
	rec   *recorder
	view  *view
	start time.Time
	// kubelet reports the replicas' containers terminated, for their
	// elections' death signal.
	kubelet *kubelet

	// mu guards the fields below.
	mu    sync.Mutex
	nodes []*node // the current incarnation of each replica, by slot
	all   []*node // every incarnation started
}

// Run runs the demo until its failovers are done or ctx ends, and returns
// its report. The error is for options it cannot use (each an
// *OptionError, checked before anything starts) or a replica it could not
// build; failed checks are in the report (Report.OK). When ctx ends first,
// the report is the partial one of the run so far, with Interrupted set.
func Run(ctx context.Context, opts Options) (*Report, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &engine{ctx: ctx, opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, 1)), start: time.Now(),
		kubelet: newKubelet(opts.Seed)}
	e.view = newView(opts.Out, opts.Live, e.start)
	e.rec = newRecorder(e.view.logf)
	if e.world, err = newWorld(e.rng); err != nil {
		return nil, err
	}
	rep := &Report{Options: opts, Started: e.start}
	rep.Options.Out, rep.Options.Logger, rep.Options.Metrics = nil, nil, nil

	stopView := e.runView()
	defer stopView() // after stopAll: deferred calls run last first
	defer e.kubelet.wait()
	defer e.stopAll()

	if err := e.startReplicas(rep); err != nil {
		return nil, err
	}
	e.failovers(rep)
	e.view.setStep("stopping")
	if ctx.Err() != nil {
		// A run cut short may be cut in the middle of a fault (a paused
		// replica resumed early is rightly unhealthy): only the checks
		// that hold at any moment, made once the replicas stopped, apply.
		rep.Interrupted = true
	} else {
		rep.Global = e.globalChecks(true)
	}
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

// startReplicas starts the replicas and says what the run will do.
func (e *engine) startReplicas(rep *Report) error {
	o := e.opts
	if o.Failovers == 0 {
		e.view.logf("starting %d replicas on one in-memory lease; no failovers: a leader is elected and checked, then the run stops", o.Replicas)
	} else {
		e.view.logf("starting %d replicas on one in-memory lease; %s, faults in order: %s; the run takes %s",
			o.Replicas, count(o.Failovers, "failover"), joinFaults(Schedule(o.Seed, o.Failovers)), about(o.Estimate()))
	}
	e.view.logf("%s", TermExplained)
	for i := range o.Replicas {
		id := fmt.Sprintf("baton-%d", i)
		n, err := e.startNode(id, 1)
		if err != nil {
			return err
		}
		e.mu.Lock()
		e.nodes = append(e.nodes, n)
		e.all = append(e.all, n)
		e.mu.Unlock()
		rep.Replicas = append(rep.Replicas, id)
		if i == 0 {
			// Why: replicas started together race for the lease, and the
			// winner would differ from run to run. baton-0 leads first, so
			// that a seed repeats a run's start; who wins each later race
			// (after a kill or a pause) is still up to timing.
			e.view.setStep("electing a first leader")
			e.waitLeader(0)
		}
	}
	return nil
}

// failovers elects a first leader and runs the failovers, until one cannot
// go on or the run's context ends. A failover the end of the context cut
// short is kept, marked Interrupted, without its checks: they failed for
// want of time, not for a fault of the replicas.
func (e *engine) failovers(rep *Report) {
	o := e.opts
	e.view.setStep("electing a first leader")
	if _, _, ok := e.waitLeader(0); !ok {
		if e.ctx.Err() == nil {
			rep.Aborted = "no first leader was elected within " + o.StepTimeout.String()
		}
		return
	}
	invalidAt := -1
	if o.Failovers >= 2 {
		invalidAt = 1 + e.rng.IntN(o.Failovers-1)
	}
	for i, fault := range Schedule(o.Seed, o.Failovers) {
		f, abort := e.failover(i, fault, i == invalidAt)
		if e.ctx.Err() != nil {
			f.Interrupted, f.Checks = true, nil
			rep.Failovers = append(rep.Failovers, f)
			e.view.logf("%s", f.line(o.Failovers))
			return
		}
		rep.Failovers = append(rep.Failovers, f)
		e.view.logf("%s", f.line(o.Failovers))
		if abort != "" {
			rep.Aborted = abort
			return
		}
	}
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
		check(fmt.Sprintf("no two replicas led at once (%s)", count(len(terms), "term")), len(overlaps) == 0, "%s", strings.Join(overlaps, "; ")),
		check("terms strictly increasing", len(order) == 0, "%s", strings.Join(order, "; ")),
		check("observers lost no events", e.rec.droppedEvents() == 0, "%s dropped", count(int(e.rec.droppedEvents()), "event")),
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
