package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/termctx"
	"github.com/baton-dev/baton/pkg/termrun"
)

// termState is one leadership term. term, acquired, ctx, cancel,
// stopWatch and members (the slice) are set before the term is published
// in Manager.term; stepDown is atomic; the rest is guarded by Manager.mu.
type termState struct {
	term     uint64
	acquired time.Time
	// ctx is the context the term's runs derive from; cancel ends it.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// stopWatch stops ending ctx with the term's source
	// (Options.TermContext); nil without a source.
	stopWatch func() bool
	// stepDown is the cause of the term's end while the Manager asks
	// Options.StepDown to end it, and after it agreed (nil otherwise).
	stepDown atomic.Pointer[error]
	// members has one entry per leader-only unit, in the same order as
	// Manager.leaderOnly.
	members []*member
	// run runs the leader-only components in the term: restarts, step-down
	// for a component that keeps failing, overstays (pkg/termrun).
	run *termrun.Term

	hooksRan bool
	readyAt  time.Time
	notified bool
	// missingSince is when the term started to miss a leader-only
	// component (zero while it misses none); missed is set the first time
	// it did, steppedDown once StepDown was called.
	missingSince time.Time
	missed       bool
	steppedDown  bool
	// blockedSince is when the term started to miss a component still
	// running from an earlier term (zero while none is); failing is the
	// runner's reason to give the term up: a component failed for
	// StepDownGrace in a row (nil otherwise). They are the two reasons to
	// step down.
	blockedSince time.Time
	failing      error
}

// member is a leader-only unit's part in one term; guarded by Manager.mu.
type member struct {
	u          *unit
	run        uint64    // the unit's run in the term: 0, then one more per failure
	started    bool      // false while the unit still runs from an earlier term
	down       bool      // its last run failed; the runner starts it again after RestartDelay
	deadline   time.Time // for Subscribed
	subscribed bool
	timedOut   bool // reported as not subscribed in time
	exited     bool
	covered    bool            // the replays ran after it subscribed
	held       map[string]bool // the required types it holds
}

// holdsAll reports whether mem holds every type its unit requires.
func (mem *member) holdsAll() bool { return len(mem.held) == len(mem.u.required) }

// startTerm begins term e.Term. It runs on Run's goroutine.
func (m *Manager) startTerm(base context.Context, e *leadership.BecameLeaderEvent) {
	now := time.Now()
	acquired := e.Timestamp()
	if acquired.IsZero() {
		acquired = now
	}
	t := &termState{term: e.Term, acquired: acquired}
	t.ctx, t.cancel = context.WithCancelCause(base)
	stamped := termctx.Term{Number: e.Term}
	if m.opts.TermContext != nil {
		if src, ok := m.opts.TermContext(e.Term); ok && src != nil {
			// The term's context answers for the source first (termctx.Follow).
			t.ctx = termctx.Follow(t.ctx, src, func() { t.sourceEnded(src) })
			t.stopWatch = context.AfterFunc(src, func() { t.sourceEnded(src) })
			if st, ok := termctx.Get(src); ok && st.Number == e.Term {
				stamped = st // the source's term: its Lease and token too
			}
		} else {
			m.logger.Warn("no source context for the term; its context ends only with the term's LostLeadershipEvent", "term", e.Term)
		}
	}
	// Stamped last, so that termctx.Err reads the term's end through the source.
	t.ctx = termctx.With(t.ctx, stamped)
	var stepDown func(error)
	if m.opts.StepDown != nil {
		stepDown = func(reason error) { m.failing(t, reason) }
	}
	t.run = m.runner.Term(t.ctx, stepDown)

	m.mu.Lock()
	for _, u := range m.leaderOnly {
		t.members = append(t.members, &member{u: u, held: map[string]bool{}})
	}
	m.term = t
	m.lastTerm = e.Term
	m.counters.terms++
	starts, blocked := m.startPendingLocked(t, now)
	m.mu.Unlock()

	m.logger.Info("became leader; starting term", "term", t.term, "identity", e.Identity,
		"leaderOnly", len(t.members), "sinceAcquired", now.Sub(acquired))
	for _, b := range blocked {
		m.logger.Warn("leader-only component still running from an earlier term; it starts in this term once it returns",
			"component", b.name, "term", t.term, "runningTerm", b.runTerm)
	}
	m.launchAll(starts)
}

// startPendingLocked starts every member of t not started yet whose unit
// is free, and returns the launches and the units still busy with an
// earlier term. m.mu must be held.
func (m *Manager) startPendingLocked(t *termState, now time.Time) (starts []launch, blocked []*unit) {
	for _, mem := range t.members {
		if mem.started {
			continue
		}
		if mem.u.running {
			blocked = append(blocked, mem.u)
			continue
		}
		mem.started = true
		mem.deadline = now.Add(m.opts.SubscribeTimeout)
		starts = append(starts, m.prepareLocked(mem.u, t.ctx, t, mem))
	}
	return starts, blocked
}

// endTerm cancels t's context with cause (unless it ended already, its
// source ended, or the Manager stepped down: see endCause) and waits for
// its components. It runs on Run's goroutine.
func (m *Manager) endTerm(t *termState, reason string, cause error) {
	_ = t.ctx.Err() // a source that has ended gives the cause (termctx.Follow)
	m.mu.Lock()
	m.term = nil
	var waiting []*unit
	for _, mem := range t.members {
		if mem.started && mem.u.running && mem.u.runTerm == t.term {
			mem.u.state = StateStopping
			waiting = append(waiting, mem.u)
		}
	}
	m.mu.Unlock()
	t.cancel(t.endCause(cause))
	if t.stopWatch != nil {
		t.stopWatch()
	}
	m.logger.Info("term ended; stopping leader-only components", "term", t.term, "reason", reason, "running", len(waiting))

	over := m.awaitStopped(waiting, t.term)
	if m.opts.OnTermStopped != nil {
		m.opts.OnTermStopped(TermStopReport{Term: t.term, Reason: reason, Stopped: time.Now(), Overstayed: over})
	}
}

// step does what the current term is ready for: late starts, subscribe
// timeouts, the term hooks, replays for late subscribers, and the term-ready
// report. It runs on Run's goroutine after every wake-up and returns the next
// subscribe deadline to wake up at (zero for none).
func (m *Manager) step() time.Time {
	for {
		t := m.term
		if t == nil {
			return time.Time{}
		}
		now := time.Now()
		m.mu.Lock()
		starts, _ := m.startPendingLocked(t, now)
		if len(starts) > 0 {
			m.checkReadyLocked(t, now) // a late start may be the last one missing
		}
		timedOut, settled, next := m.scanSubscribedLocked(t, now)
		runAll := !t.hooksRan && settled
		runReplays := false
		if t.hooksRan || runAll {
			for _, mem := range t.members {
				if mem.subscribed && !mem.covered {
					mem.covered = true
					runReplays = runReplays || t.hooksRan
				}
			}
		}
		miss := m.checkMissingLocked(t, now)
		if !miss.deadline.IsZero() && (next.IsZero() || miss.deadline.Before(next)) {
			next = miss.deadline
		}
		var report *TermReport
		if !t.readyAt.IsZero() && !t.notified {
			t.notified = true
			r := TermReport{Term: t.term, Acquired: t.acquired, Ready: t.readyAt, Latency: t.readyAt.Sub(t.acquired)}
			m.lastReady = r
			m.counters.readyTerms++
			report = &r
		}
		m.mu.Unlock()

		m.launchAll(starts)
		m.reportTimedOut(t, timedOut)
		switch {
		case runAll:
			m.runHooks(t, false)
			m.mu.Lock()
			t.hooksRan = true
			m.checkReadyLocked(t, time.Now())
			m.mu.Unlock()
		case runReplays:
			m.runHooks(t, true)
		}
		if report != nil {
			m.reportReady(*report)
		}
		m.reportMissing(t, miss)
		if len(starts) == 0 && len(timedOut) == 0 && !runAll && !runReplays && report == nil && !miss.stepDown {
			return next
		}
	}
}

// scanSubscribedLocked marks the members whose subscribe deadline passed
// and returns them, whether every started member is settled (subscribed,
// exited or timed out), and the next deadline. m.mu must be held.
func (m *Manager) scanSubscribedLocked(t *termState, now time.Time) (timedOut []*member, settled bool, next time.Time) {
	settled = true
	for _, mem := range t.members {
		if !mem.started || mem.subscribed || mem.exited || mem.down || mem.timedOut {
			continue
		}
		if !now.Before(mem.deadline) {
			mem.timedOut = true
			mem.u.subscribeTimeouts++
			m.counters.subscribeTimeouts++
			timedOut = append(timedOut, mem)
			continue
		}
		settled = false
		if next.IsZero() || mem.deadline.Before(next) {
			next = mem.deadline
		}
	}
	return timedOut, settled, next
}

// reportTimedOut logs and publishes the members that missed their
// subscribe deadline. It runs on Run's goroutine.
func (m *Manager) reportTimedOut(t *termState, timedOut []*member) {
	for _, mem := range timedOut {
		waited := m.opts.SubscribeTimeout
		m.logger.Warn("leader-only component did not signal Subscribed in time; replaying without it, and again once it subscribes",
			"component", mem.u.name, "term", t.term, "waited", waited)
		m.bus.Publish(NewComponentOverstayedEvent(mem.u.name, t.term, OverstaySubscribe, waited))
	}
}

// runHooks runs the term hooks, again if late is set, for components that
// subscribed after the first run. It runs on Run's goroutine.
func (m *Manager) runHooks(t *termState, late bool) {
	if t.ctx.Err() != nil {
		return
	}
	for _, h := range m.hooks {
		m.runHook(h, t.term)
	}
	if late {
		m.logger.Info("term hooks ran again for late subscribers", "term", t.term, "hooks", len(m.hooks))
	} else {
		m.logger.Info("term hooks ran", "term", t.term, "hooks", len(m.hooks))
	}
}

func (m *Manager) runHook(h hook, term uint64) {
	defer func() {
		if r := recover(); r != nil {
			m.mu.Lock()
			m.counters.hookFailures++
			m.mu.Unlock()
			m.logger.Error("term hook panicked", "hook", h.name, "term", term, "panic", fmt.Sprint(r))
		}
	}()
	h.fn(term)
}

func (m *Manager) reportReady(r TermReport) {
	m.logger.Info("term ready", "term", r.Term, "latency", r.Latency)
	if m.opts.OnTermReady != nil {
		m.opts.OnTermReady(r)
	}
}

// checkReadyLocked records the moment t became ready, if it just did.
// m.mu must be held.
func (m *Manager) checkReadyLocked(t *termState, now time.Time) bool {
	if !t.hooksRan || !t.readyAt.IsZero() {
		return false
	}
	for _, mem := range t.members {
		if !mem.started {
			return false // still running from an earlier term
		}
		if !mem.holdsAll() {
			return false
		}
	}
	t.readyAt = now
	return true
}

// subscribed records a Subscribed signal; see the function of that name.
func (m *Manager) subscribed(tok *runToken) {
	m.mu.Lock()
	if m.term != tok.t || tok.run != tok.mem.run || tok.mem.subscribed {
		m.mu.Unlock()
		return
	}
	tok.mem.subscribed = true
	m.mu.Unlock()
	m.wake()
}

// holds records a HoldsState signal; see the function of that name.
func (m *Manager) holds(tok *runToken, eventType string) {
	now := time.Now()
	m.mu.Lock()
	if m.term != tok.t || tok.run != tok.mem.run || !slices.Contains(tok.u.required, eventType) || tok.mem.held[eventType] {
		m.mu.Unlock()
		return
	}
	tok.mem.held[eventType] = true
	ready := m.checkReadyLocked(tok.t, now)
	m.mu.Unlock()
	if ready {
		m.wake()
	}
}

// endCause returns the cause of t's end: the step-down's while the Manager
// asks to step down or once it did, else cause.
func (t *termState) endCause(cause error) error {
	if p := t.stepDown.Load(); p != nil {
		return *p
	}
	return cause
}

// sourceEnded ends the term's context because src, its source, ended:
// with ErrLeadershipLost wrapping the source's cause, unless the Manager
// stepped down (endCause). It is safe for concurrent use.
func (t *termState) sourceEnded(src context.Context) {
	cause := ErrLeadershipLost
	if c := context.Cause(src); c != nil {
		cause = fmt.Errorf("%w: %w", ErrLeadershipLost, c)
	}
	t.cancel(t.endCause(cause))
}

// missingLocked reports whether the term misses mem's component: it is
// still running from an earlier term, or its last run in this one failed and
// it waits to be started again. m.mu must be held.
func missingLocked(mem *member) bool {
	if !mem.started {
		return mem.u.running
	}
	return mem.down
}

// missing is what checkMissingLocked found: the components missed when the
// term began to miss one (began) or when it is time to step down
// (stepDown), and the moment the grace ends (zero when nothing is missing,
// step-down is off or was asked for).
type missing struct {
	began, ended, stepDown bool
	first                  bool  // began for the first time in the term
	failing                error // the runner's reason to step down, if that is why
	names                  []string
	since                  time.Time
	deadline               time.Time
}

// checkMissingLocked updates t's missing state at now, and decides whether
// to step down: a component still running from an earlier term for
// StepDownGrace, or one that the runner found failing for as long
// (failing). m.mu must be held.
func (m *Manager) checkMissingLocked(t *termState, now time.Time) missing {
	out := m.trackMissingLocked(t, now)
	if m.opts.StepDown == nil || t.steppedDown {
		return m.namesLocked(t, out)
	}
	switch end := t.blockedSince.Add(m.opts.StepDownGrace); {
	case t.failing != nil:
		out.failing = t.failing
	case t.blockedSince.IsZero():
		return m.namesLocked(t, out)
	case now.Before(end):
		out.deadline = end
		return m.namesLocked(t, out)
	}
	t.steppedDown = true
	out.stepDown = true
	m.counters.stepDowns++
	return m.namesLocked(t, out)
}

// trackMissingLocked records when t began, or ceased, to miss a component.
// m.mu must be held.
func (m *Manager) trackMissingLocked(t *termState, now time.Time) missing {
	var out missing
	found := slices.ContainsFunc(t.members, missingLocked)
	blocked := slices.ContainsFunc(t.members, func(mem *member) bool { return !mem.started && mem.u.running })
	switch {
	case !blocked:
		t.blockedSince = time.Time{}
	case t.blockedSince.IsZero():
		t.blockedSince = now
	}
	switch {
	case !found && !t.missingSince.IsZero():
		out.ended, out.since = true, t.missingSince
		t.missingSince = time.Time{}
	case found && t.missingSince.IsZero():
		t.missingSince = now
		out.began, out.first = true, !t.missed
		if !t.missed {
			t.missed = true
			m.counters.missingTerms++
		}
	}
	if found {
		out.since = t.missingSince
	}
	return out
}

// failing is the step-down function of t's runner: a leader-only component
// failed for StepDownGrace in a row. The Manager's goroutine steps down
// (step). It is safe for concurrent use.
func (m *Manager) failing(t *termState, reason error) {
	m.mu.Lock()
	if t.failing == nil {
		t.failing = reason
	}
	m.mu.Unlock()
	m.wake()
}

// namesLocked fills out.names when out is to be reported. m.mu must be
// held.
func (m *Manager) namesLocked(t *termState, out missing) missing {
	if !out.began && !out.stepDown {
		return out
	}
	for _, mem := range t.members {
		if missingLocked(mem) {
			what := "failing in this term"
			if !mem.started {
				what = fmt.Sprintf("still running from term %d", mem.u.runTerm)
			}
			out.names = append(out.names, mem.u.name+" ("+what+")")
		}
	}
	return out
}

// reportMissing logs what checkMissingLocked found and, when it is time,
// asks Options.StepDown to end the term. It runs on Run's goroutine.
func (m *Manager) reportMissing(t *termState, miss missing) {
	switch {
	case miss.ended:
		m.logger.Debug("term no longer misses a leader-only component", "term", t.term, "missedFor", time.Since(miss.since))
	case miss.began && miss.first:
		m.logger.Error("leading without a leader-only component; the replica is unhealthy",
			"term", t.term, "missing", miss.names, "stepDownIn", m.stepDownIn())
	case miss.began:
		m.logger.Debug("leading without a leader-only component again", "term", t.term, "missing", miss.names)
	}
	if !miss.stepDown {
		return
	}
	reason := fmt.Errorf("%w: term %d misses %s since %s", ErrMissingComponent, t.term,
		strings.Join(miss.names, ", "), time.Since(miss.since).Round(time.Millisecond))
	if miss.failing != nil {
		reason = fmt.Errorf("%w: term %d: %w", ErrMissingComponent, t.term, miss.failing)
	}
	m.logger.Error("stepping down so that another replica leads", "term", t.term, "reason", reason)
	cause := fmt.Errorf("%w: %w", ErrSteppedDown, reason)
	t.stepDown.Store(&cause) // StepDown may end the term's source before it returns
	if !m.opts.StepDown(t.term, reason) {
		t.stepDown.Store(nil)
		m.logger.Warn("step-down refused: the term is already over, or this replica leads alone", "term", t.term)
	}
}

func (m *Manager) stepDownIn() any {
	if m.opts.StepDown == nil {
		return "never (no StepDown)"
	}
	return m.opts.StepDownGrace
}
