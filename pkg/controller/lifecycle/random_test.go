package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/termctx"
	"github.com/baton-dev/baton/pkg/termrun"
)

// Timings of the randomized histories (fake time).
const (
	rhStopTimeout      = time.Second
	rhSubscribeTimeout = 500 * time.Millisecond
	rhStepDownGrace    = 2 * time.Second
)

// TestRandomTermHistories drives a Manager with seeded random histories:
// leadership events in every order the elector adapter could publish them
// (new terms, repeated and stale terms, losses of the current, an earlier
// and a later term, bursts), the end of a term's source context
// (Options.TermContext) before its LostLeadershipEvent, state published
// through a replayer, and
// leader-only components that per term subscribe on time or late, fail,
// panic, return early or overstay their stop. After every step, once the
// bubble settled, a checker compares the Manager with a model of the
// contract in doc.go:
//
//   - a component never runs twice at once;
//   - a leader-only component runs (context not done) only in the current
//     term, and only while the replica leads;
//   - once a term's source ended, its runs end (those that do not overstay
//     return) with the cause ErrLeadershipLost (or ErrSteppedDown) before
//     the LostLeadershipEvent, though nobody calls Err or Done on their
//     contexts;
//   - Status reports the model's leadership and term;
//   - every running component that subscribed holds the newest state, and
//     the versions it received never went backwards or repeated;
//   - a term whose components all run, subscribed and hold state is ready
//     and healthy; a term missing one (failed in it and not yet restarted,
//     or still running from an earlier term) says so in Status.Missing and
//     Healthy; a failed component runs again in the term (pkg/termrun), and
//     a run that failed ended its context with termrun.ErrRunEnded;
//   - a term that missed a component still running from an earlier term
//     for longer than StepDownGrace, or whose component failed in a row for
//     as long (pkg/termrun's rule), asked to step down, at most once per
//     term, and never one that missed none;
//   - Run returns nil at the end and every goroutine ends.
//
// BATON_LIFECYCLE_HISTORIES sets the number of histories (default 200);
// BATON_LIFECYCLE_SEED replays one.
func TestRandomTermHistories(t *testing.T) {
	seeds := make([]uint64, 0, 200)
	if s := os.Getenv("BATON_LIFECYCLE_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("BATON_LIFECYCLE_SEED=%q: %v", s, err)
		}
		seeds = append(seeds, seed)
	} else {
		n := 200
		if s := os.Getenv("BATON_LIFECYCLE_HISTORIES"); s != "" {
			var err error
			if n, err = strconv.Atoi(s); err != nil || n < 1 {
				t.Fatalf("BATON_LIFECYCLE_HISTORIES=%q: want a positive integer", s)
			}
		}
		if testing.Short() {
			n = min(n, 30)
		}
		for i := range n {
			seeds = append(seeds, uint64(i+1))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newRandomHistory(t, seed)
				h.run()
				if t.Failed() {
					t.Logf("replay: BATON_LIFECYCLE_SEED=%d go test -race -run TestRandomTermHistories ./pkg/controller/lifecycle", seed)
				}
			})
		})
	}
}

// rcBehavior is what a randomized component does in one term.
type rcBehavior int

const (
	rcNormal        rcBehavior = iota // subscribe after a short delay, run until the term ends
	rcLateSubscribe                   // subscribe after SubscribeTimeout passed
	rcFail                            // subscribe, then return an error
	rcPanic                           // subscribe, then panic
	rcEarlyReturn                     // subscribe, then return nil while the term runs
	rcOverstay                        // run normally, then outlive StopTimeout when the term ends
)

var rcBehaviorNames = [...]string{"normal", "late-subscribe", "fail", "panic", "early-return", "overstay"}

// rcRun is one Start of a randomized component.
type rcRun struct {
	term       uint64
	ctx        context.Context
	behavior   rcBehavior
	subscribed bool
	exited     bool
	faulted    bool // returned by its planned fault (fail, panic, early return), not by the term's end
	start, end time.Time
	versions   []int // state versions received, in order
	// ch is the channel the run subscribed (nil before); closedLive is set
	// if the run saw it closed while its context was not done.
	ch         <-chan *events.ConfigValidatedEvent
	closedLive bool
}

// randomComp is a leader-only component whose behavior in each term is a
// function of the history's seed, its index and the term, so that it does
// not depend on the order goroutines run in.
type randomComp struct {
	name string
	idx  uint64
	seed uint64
	bus  *busevents.EventBus

	mu         sync.Mutex
	running    int
	maxRunning int
	runs       []*rcRun
}

func (c *randomComp) Name() string            { return c.name }
func (c *randomComp) RequiredState() []string { return []string{events.EventTypeConfigValidated} }

// plan returns the behavior of term and a delay drawn for it.
func (c *randomComp) plan(term uint64) (rcBehavior, time.Duration) {
	r := rand.New(rand.NewPCG(c.seed, c.idx<<40|term))
	b := rcNormal
	if x := r.IntN(100); x >= 55 {
		b = rcBehavior(1 + (x-55)/9) // 9% each of the five faults
	}
	return b, time.Duration(r.IntN(300)) * time.Millisecond
}

func (c *randomComp) Start(ctx context.Context) error {
	term, _ := termctx.FromContext(ctx)
	b, d := c.plan(term)
	run := &rcRun{term: term, ctx: ctx, behavior: b, start: time.Now()}
	c.mu.Lock()
	c.running++
	c.maxRunning = max(c.maxRunning, c.running)
	c.runs = append(c.runs, run)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running--
		run.exited, run.end = true, time.Now()
		c.mu.Unlock()
	}()

	delay := d
	if b == rcLateSubscribe {
		delay += rhSubscribeTimeout
	}
	select {
	case <-time.After(delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	ch := busevents.Subscribe[*events.ConfigValidatedEvent](ctx, c.bus, c.name, 16)
	c.mu.Lock()
	run.subscribed, run.ch = true, ch
	c.mu.Unlock()
	lifecycle.Subscribed(ctx)

	var fault <-chan time.Time
	if b == rcFail || b == rcPanic || b == rcEarlyReturn {
		fault = time.After(d)
	}
	for {
		select {
		case <-ctx.Done():
			if b == rcOverstay {
				time.Sleep(rhStopTimeout + d + 10*time.Millisecond)
			}
			return ctx.Err()
		case <-fault:
			c.mu.Lock()
			run.faulted = true
			c.mu.Unlock()
			switch b {
			case rcFail:
				return errBoom
			case rcPanic:
				panic("randomComp: planned panic")
			default:
				return nil
			}
		case ev, ok := <-ch:
			if !ok {
				if ctx.Err() == nil {
					c.mu.Lock()
					run.closedLive = true
					c.mu.Unlock()
				}
				<-ctx.Done()
				return ctx.Err()
			}
			v, _ := strconv.Atoi(ev.Version)
			c.mu.Lock()
			run.versions = append(run.versions, v)
			c.mu.Unlock()
			lifecycle.HoldsState(ctx, ev.EventType())
		}
	}
}

// snapshot returns copies of the component's runs and its concurrency peak.
func (c *randomComp) snapshot() ([]rcRun, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]rcRun, len(c.runs))
	for i, r := range c.runs {
		out[i] = *r
		out[i].versions = slices.Clone(r.versions)
	}
	return out, c.maxRunning
}

// randomHistory is one seeded history and the model the checker holds.
type randomHistory struct {
	t      *testing.T
	seed   uint64
	r      *rand.Rand
	bus    *busevents.EventBus
	m      *lifecycle.Manager
	state  *leadership.StateReplayer[*events.ConfigValidatedEvent]
	comps  []*randomComp
	cancel context.CancelFunc
	runErr chan error

	// the model
	leading     bool
	current     uint64 // the term started last (0: none)
	version     int    // the newest state version published
	log         []string
	logs        logRecorder // the Manager's log, printed when the history fails
	stepDownsMu sync.Mutex
	stepDowns   []stepDownCall
	resigned    map[uint64]bool // terms whose step-down the driver answered
	srcMu       sync.Mutex
	srcs        map[uint64]context.CancelCauseFunc // each term's source's end
}

// errSourceLost is the cause a term's source ends with.
var errSourceLost = errors.New("source: lease lost")

type stepDownCall struct {
	term    uint64
	missing []string
	at      time.Time
}

func newRandomHistory(t *testing.T, seed uint64) *randomHistory {
	h := &randomHistory{t: t, seed: seed, r: rand.New(rand.NewPCG(seed, 0x6c69666563)), runErr: make(chan error, 1), resigned: map[uint64]bool{},
		srcs: map[uint64]context.CancelCauseFunc{}}
	h.bus = busevents.NewEventBusWithLogger(0, discard())
	h.state = leadership.NewStateReplayer[*events.ConfigValidatedEvent](h.bus)
	m, err := lifecycle.NewManager(h.bus, lifecycle.Options{
		Logger:           slog.New(&h.logs),
		StopTimeout:      rhStopTimeout,
		SubscribeTimeout: rhSubscribeTimeout,
		StepDownGrace:    rhStepDownGrace,
		StepDown:         h.stepDown,
		TermContext:      h.termContext,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	for i := range 2 + h.r.IntN(3) {
		c := &randomComp{name: fmt.Sprintf("c%d", i), idx: uint64(i), seed: seed, bus: h.bus}
		h.comps = append(h.comps, c)
		if err := m.AddLeaderOnly(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.AddReplayer("config", h.state); err != nil {
		t.Fatal(err)
	}
	return h
}

// stepDown is Options.StepDown: it records the call; the driver answers it
// with a LostLeadershipEvent at its next step, as the elector would.
func (h *randomHistory) stepDown(term uint64, _ error) bool {
	s := h.m.Status()
	h.stepDownsMu.Lock()
	h.stepDowns = append(h.stepDowns, stepDownCall{term: term, missing: s.Missing, at: time.Now()})
	h.stepDownsMu.Unlock()
	return true
}

// termContext is Options.TermContext: a source per term, which the driver
// ends (endSource) as an elector's term context ends.
func (h *randomHistory) termContext(term uint64) (context.Context, bool) {
	ctx, end := context.WithCancelCause(context.Background())
	h.srcMu.Lock()
	h.srcs[term] = end
	h.srcMu.Unlock()
	return ctx, true
}

func (h *randomHistory) run() {
	h.bus.Start()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.runErr <- h.m.Run(ctx) }()
	h.publishState()
	steps := 25 + h.r.IntN(25)
	for step := 0; step < steps && !h.t.Failed(); step++ {
		h.answerStepDowns()
		h.act(step)
		time.Sleep(rhStopTimeout + 10*time.Millisecond + time.Duration(h.r.IntN(2500))*time.Millisecond)
		synctest.Wait()
		h.check(step)
	}
	cancel()
	if err := <-h.runErr; err != nil {
		h.t.Errorf("Run returned %v, want nil", err)
	}
	<-h.m.Done()
	h.bus.Stop()
	if h.t.Failed() {
		h.logs.mu.Lock()
		h.t.Logf("history:\n  %s\nmanager log:\n  %s", strings.Join(h.log, "\n  "), strings.Join(h.logs.lines, "\n  "))
		h.logs.mu.Unlock()
	}
}

func (h *randomHistory) record(format string, args ...any) {
	h.log = append(h.log, fmt.Sprintf("%8s ", time.Duration(time.Now().UnixNano()%int64(time.Hour)).Truncate(time.Millisecond))+fmt.Sprintf(format, args...))
}

// answerStepDowns ends, as the elector would, each term the Manager asked
// to step down from.
func (h *randomHistory) answerStepDowns() {
	h.stepDownsMu.Lock()
	calls := slices.Clone(h.stepDowns)
	h.stepDownsMu.Unlock()
	for _, c := range calls {
		if !h.resigned[c.term] {
			h.resigned[c.term] = true
			h.lose(c.term, "resigned")
		}
	}
}

// act performs one random step, or a burst of up to four.
func (h *randomHistory) act(step int) {
	n := 1
	if h.r.IntN(5) == 0 {
		n = 2 + h.r.IntN(3)
	}
	for range n {
		switch x := h.r.IntN(100); {
		case x < 30:
			h.publishState()
		case x < 55:
			h.lead(h.current + 1 + uint64(h.r.IntN(2)))
		case x < 62:
			h.lead(uint64(h.r.IntN(int(h.current) + 1))) // repeated or stale
		case x < 74:
			h.lose(h.current, "lost")
		case x < 82:
			h.endSource(step)
		case x < 88:
			h.lose(uint64(h.r.IntN(int(h.current)+1)), "lost (earlier)")
		case x < 93:
			h.lose(h.current+1+uint64(h.r.IntN(3)), "lost (later)")
		default:
			// nothing: time passes
		}
	}
}

// endSource ends the source of the current term, as an elector's term
// context ends when the lease is lost, checks once the bubble settled that
// the Manager ended the term's runs by itself, and then publishes the
// term's LostLeadershipEvent, as the elector does after.
func (h *randomHistory) endSource(step int) {
	term := h.current
	h.srcMu.Lock()
	end := h.srcs[term]
	h.srcMu.Unlock()
	if !h.leading || end == nil {
		h.lose(term, "lost")
		return
	}
	end(errSourceLost)
	h.record("source of term %d ended", term)
	synctest.Wait()
	for _, c := range h.comps {
		runs, _ := c.snapshot()
		for _, run := range runs {
			if run.term != term {
				continue
			}
			// exited first: Err and Done on the run's context would end it.
			if !run.exited && run.behavior != rcOverstay {
				h.t.Errorf("step %d: %s still runs in term %d after the term's source ended", step, c.name, term)
			}
			// A run that failed by its fault ended before, with its own return;
			// the runner restarted the component in the term (pkg/termrun).
			cause := context.Cause(run.ctx)
			if run.faulted && !errors.Is(cause, termrun.ErrRunEnded) {
				h.t.Errorf("step %d: %s's failed run in term %d has cause %v", step, c.name, term, cause)
			}
			if !run.faulted && !errors.Is(cause, lifecycle.ErrLeadershipLost) && !errors.Is(cause, lifecycle.ErrSteppedDown) {
				h.t.Errorf("step %d: %s's context in term %d ended with %v after the source ended", step, c.name, term, cause)
			}
		}
	}
	h.lose(term, "source ended")
}

func (h *randomHistory) publishState() {
	h.version++
	v := strconv.Itoa(h.version)
	h.state.Publish(events.NewConfigValidatedEvent(&config.Config{}, v, "random"))
	h.record("state v%d", h.version)
}

func (h *randomHistory) lead(term uint64) {
	h.bus.Publish(events.NewBecameLeaderEvent("me", term))
	if term > h.current {
		h.current, h.leading = term, true
		plans := ""
		for _, c := range h.comps {
			b, d := c.plan(term)
			plans += fmt.Sprintf(" %s=%s/%v", c.name, rcBehaviorNames[b], d)
		}
		h.record("became leader, term %d:%s", term, plans)
		return
	}
	h.record("became leader, term %d (ignored)", term)
}

func (h *randomHistory) lose(term uint64, why string) {
	h.bus.Publish(events.NewLostLeadershipEvent("me", term, why))
	if h.leading && (term == 0 || term >= h.current) { // 0: an unknown term
		h.leading = false
		h.record("%s, term %d", why, term)
		return
	}
	h.record("%s, term %d (ignored)", why, term)
}

// check compares the settled Manager and components with the model.
func (h *randomHistory) check(step int) {
	t := h.t
	s := h.m.Status()
	if s.Leading != h.leading || (h.leading && s.Term != h.current) {
		t.Errorf("step %d: Status leading=%v term %d, model leading=%v term %d", step, s.Leading, s.Term, h.leading, h.current)
	}
	missing := map[string]bool{}
	allHold := h.leading && h.version > 0
	due := false // the term must have asked to step down
	for _, c := range h.comps {
		runs, peak := c.snapshot()
		if peak > 1 {
			t.Errorf("step %d: %s ran %d Starts at once", step, c.name, peak)
		}
		var live *rcRun // the run of the current term, if not exited
		older := false  // a run of an earlier term has not returned
		for i := range runs {
			run := &runs[i]
			h.checkVersions(step, c.name, run)
			h.checkChannel(step, c.name, run)
			if run.ctx.Err() == nil && (!h.leading || run.term != h.current) {
				t.Errorf("step %d: %s runs in term %d, model leading=%v term %d", step, c.name, run.term, h.leading, h.current)
			}
			switch {
			case run.term == h.current && !run.exited:
				live = run
			case run.term < h.current && !run.exited:
				older = true
			}
		}
		if !h.leading {
			continue
		}
		due = due || crashLoopDue(runs, h.current) ||
			(live == nil && older && time.Since(s.TermAcquired) > rhStepDownGrace+rhStopTimeout)
		if live == nil {
			missing[c.name] = true
			allHold = false
			continue
		}
		if older {
			t.Errorf("step %d: %s runs in term %d while a run of an earlier term has not returned", step, c.name, h.current)
		}
		if !live.subscribed {
			allHold = false
			continue
		}
		if len(live.versions) == 0 {
			// The replay waits until every run of the term subscribed or
			// let SubscribeTimeout pass; runs start up to a StopTimeout
			// late (after the last term's stop, or an overstayer's return).
			if time.Since(s.TermAcquired) < 2*rhStopTimeout+rhSubscribeTimeout {
				allHold = false
				continue
			}
			t.Errorf("step %d: %s subscribed in term %d and holds no state, newest is v%d", step, c.name, h.current, h.version)
			continue
		}
		if got := live.versions[len(live.versions)-1]; got != h.version {
			t.Errorf("step %d: %s holds state v%d in term %d, newest is v%d (received %v)", step, c.name, got, h.current, h.version, live.versions)
		}
	}
	if h.leading {
		h.checkMissing(step, s, missing, allHold)
	}
	h.checkStepDowns(step, s, due)
}

// checkChannel fails when a run's channel was closed while the run's
// context was live, or is still open once that context is done. With the
// bubble settled, a run whose context is done reads nothing any more, so
// the check may drain what it left.
func (h *randomHistory) checkChannel(step int, name string, run *rcRun) {
	if run.closedLive {
		h.t.Errorf("step %d: %s in term %d saw its channel closed while its context was live", step, name, run.term)
	}
	if run.ch == nil || run.ctx.Err() == nil {
		return
	}
	for {
		select {
		case _, ok := <-run.ch:
			if ok {
				continue
			}
		default:
			h.t.Errorf("step %d: %s in term %d: its channel is open after its context ended (exited %t)", step, name, run.term, run.exited)
		}
		return
	}
}

// checkVersions fails when a run received a version twice or out of order.
func (h *randomHistory) checkVersions(step int, name string, run *rcRun) {
	for i := 1; i < len(run.versions); i++ {
		if run.versions[i] <= run.versions[i-1] {
			h.t.Errorf("step %d: %s in term %d received v%d after v%d (%v)", step, name, run.term, run.versions[i], run.versions[i-1], run.versions)
			return
		}
	}
}

func (h *randomHistory) checkMissing(step int, s lifecycle.Status, missing map[string]bool, allHold bool) {
	t := h.t
	got := map[string]bool{}
	for _, name := range s.Missing {
		got[name] = true
	}
	for name := range missing {
		if !got[name] {
			t.Errorf("step %d: %s has no run in term %d, Status.Missing = %v", step, name, h.current, s.Missing)
		}
	}
	for name := range got {
		if !missing[name] {
			t.Errorf("step %d: Status.Missing names %s, which runs in term %d", step, name, h.current)
		}
	}
	if len(missing) > 0 && !errors.Is(s.Healthy(), lifecycle.ErrComponentFailed) {
		t.Errorf("step %d: term %d misses %v, Healthy() = %v", step, h.current, s.Missing, s.Healthy())
	}
	if len(missing) == 0 && s.Healthy() != nil {
		t.Errorf("step %d: term %d misses nothing, Healthy() = %v", step, h.current, s.Healthy())
	}
	if allHold && !s.TermReady {
		t.Errorf("step %d: every component runs and holds v%d in term %d, but the term is not ready", step, h.version, h.current)
	}
}

// crashLoopDue reports whether the runs of term failed, by pkg/termrun's
// rule, for StepDownGrace in a row: a streak starts at a failure and goes on
// while every later run fails within the grace of its start.
func crashLoopDue(runs []rcRun, term uint64) bool {
	var streak time.Time
	for _, r := range runs {
		if r.term != term || !r.faulted {
			continue
		}
		switch {
		case streak.IsZero() || r.end.Sub(r.start) >= rhStepDownGrace:
			streak = r.end
		case r.end.Sub(streak) >= rhStepDownGrace:
			return true
		}
	}
	return false
}

func (h *randomHistory) checkStepDowns(step int, s lifecycle.Status, due bool) {
	t := h.t
	h.stepDownsMu.Lock()
	calls := slices.Clone(h.stepDowns)
	h.stepDownsMu.Unlock()
	asked := map[uint64]bool{}
	for _, c := range calls {
		if asked[c.term] {
			t.Errorf("step %d: asked to step down from term %d twice", step, c.term)
		}
		asked[c.term] = true
		if len(c.missing) == 0 {
			t.Errorf("step %d: asked to step down from term %d, which missed no component", step, c.term)
		}
	}
	if h.leading && due && !asked[h.current] {
		t.Errorf("step %d: term %d misses %v since %v: a component crash-loops, or runs from an earlier term, for longer than the grace, and it did not ask to step down",
			step, h.current, s.Missing, time.Since(s.MissingSince))
	}
}
