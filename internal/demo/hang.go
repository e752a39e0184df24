package demo

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/pkg/controller/lifecycle"
)

// StallComponent is the name of the leader-only component every replica of
// the demo runs, which the hang fault makes hang.
const StallComponent = "stall"

// stall is a leader-only component that does nothing until told to hang:
// then the run in progress ignores the end of its term and keeps running
// until unblocked, as a component stuck in a call would.
type stall struct {
	armed atomic.Bool
	// mu guards release.
	mu      sync.Mutex
	release chan struct{} // closed by unblock; replaced by arm
}

func newStall() *stall { return &stall{release: make(chan struct{})} }

func (s *stall) Name() string { return StallComponent }

func (s *stall) Start(ctx context.Context) error {
	lifecycle.Subscribed(ctx)
	<-ctx.Done()
	if s.armed.Load() {
		s.mu.Lock()
		release := s.release
		s.mu.Unlock()
		<-release
	}
	return nil
}

// arm makes the run in progress hang at the end of its term.
func (s *stall) arm() {
	s.mu.Lock()
	s.release = make(chan struct{})
	s.mu.Unlock()
	s.armed.Store(true)
}

// unblock lets a hanging run return; later runs no longer hang.
func (s *stall) unblock() {
	if s.armed.CompareAndSwap(true, false) {
		s.mu.Lock()
		close(s.release)
		s.mu.Unlock()
	}
}

// hang is the hang fault: the leader's stall component hangs when its term
// ends, so that the replica, when it leads again, misses it. The fault
// pauses the leader until another replica leads, then pauses every other
// replica until the stuck one leads again; it must report itself unhealthy
// and, after the step-down grace, resign, so that another replica takes the
// released lease at once. The failover then checks that hand-over, from
// the stuck replica's term to the next.
func (r *failoverRun) hang() string {
	e, o, f, old := r.e, r.e.opts, &r.f, r.old
	r.stepDowns = old.r.Manager().Status().StepDowns
	e.rec.mark(Mark{At: time.Now(), Kind: MarkPause, Replica: old.id, Term: r.oldTerm, Text: "stall armed, paused"})
	e.view.logf("failover %d: %s's %q component will hang when term %d ends; pausing %s until another replica leads",
		f.N, old.id, StallComponent, r.oldTerm, old.id)
	old.stall.arm()
	old.gate.pause()
	_, between, ok := e.waitLeader(r.oldTerm)
	old.gate.resume()
	e.rec.mark(Mark{At: time.Now(), Kind: MarkResume, Replica: old.id, Term: r.oldTerm, Text: "resumed"})
	if !ok {
		r.fail("leader while stuck", "no other leader above term %d within %v", r.oldTerm, o.StepTimeout)
		return "no leader"
	}
	others := e.liveNodes(old)
	for _, n := range others {
		e.rec.mark(Mark{At: time.Now(), Kind: MarkPause, Replica: n.id, Text: "paused until " + old.id + " leads again"})
		n.gate.pause()
	}
	e.view.logf("failover %d: %s resumed with %q still running from term %d; the others paused until it leads again",
		f.N, old.id, StallComponent, r.oldTerm)
	stuckTerm := uint64(0)
	e.waitFor(func() bool {
		st := old.r.Manager().Status()
		stuckTerm = st.Term
		return st.Leading && st.Term > between
	})
	for _, n := range others {
		n.gate.resume()
		e.rec.mark(Mark{At: time.Now(), Kind: MarkResume, Replica: n.id, Text: "resumed"})
	}
	if stuckTerm <= between {
		r.fail("stuck replica leads again", "%s did not lead again within %v", old.id, o.StepTimeout)
		return "stuck replica did not lead"
	}
	r.checkStuck(stuckTerm)
	f.FaultAt, r.oldTerm, f.OldTerm = time.Now(), stuckTerm, stuckTerm
	e.rec.mark(Mark{At: f.FaultAt, Kind: MarkStall, Replica: old.id, Term: stuckTerm, Text: "leads without " + StallComponent})
	e.view.logf("failover %d: %s leads term %d without %q: unhealthy; it must resign after %v",
		f.N, old.id, stuckTerm, StallComponent, o.stepDownGrace())
	return ""
}

// checkStuck checks that the stuck replica, leading term, says what it
// misses.
func (r *failoverRun) checkStuck(term uint64) {
	old := r.old
	st := old.r.Manager().Status()
	health, ready := old.r.Healthy(), old.r.Ready()
	r.f.Checks = append(r.f.Checks,
		check("stuck component reported", st.Term == term && len(st.Missing) == 1 && st.Missing[0] == StallComponent,
			"%s leads term %d missing %v", old.id, st.Term, st.Missing),
		check("stuck leader unhealthy", health != nil && strings.Contains(health.Error(), StallComponent) &&
			ready != nil && strings.Contains(ready.Error(), StallComponent),
			"%s: /healthz %v, /readyz %v", old.id, health, ready))
}

// recoverHang checks that the stuck replica resigned (once) and, its
// component unblocked, is healthy again.
func (r *failoverRun) recoverHang() {
	e, old := r.e, r.old
	resigned := old.r.Manager().Status().StepDowns - r.stepDowns
	old.stall.unblock()
	healthy := e.waitFor(func() bool { return old.r.Healthy() == nil })
	r.f.Checks = append(r.f.Checks,
		check("stuck leader resigned", resigned == 1, "%s asked to step down %s in this failover, want once", old.id, count(int(resigned), "time")),
		check("unblocked replica healthy", healthy, "%s still unhealthy: %v", old.id, old.r.Healthy()))
}
