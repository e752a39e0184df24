package app_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/controller/app"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
)

// hanger is a leader-only component that, in the first term it runs in,
// ignores the end of its term until released: a stuck component.
type hanger struct {
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	runs    int
}

func (h *hanger) Name() string { return "hanger" }

func (h *hanger) Start(ctx context.Context) error {
	lifecycle.Subscribed(ctx)
	h.mu.Lock()
	h.runs++
	first := h.runs == 1
	h.mu.Unlock()
	if first {
		<-h.release
		return nil
	}
	<-ctx.Done()
	return nil
}

func (h *hanger) unblock() { h.once.Do(func() { close(h.release) }) }

// TestStuckComponentHandsLeadershipOver: a replica whose leader-only
// component hung in an earlier term and still runs is unhealthy and not
// ready when it leads again, and resigns after the step-down grace; another
// replica takes over at once and becomes ready.
func TestStuckComponentHandsLeadershipOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const grace = 2 * time.Second
		w := newWorld(t)
		hang := &hanger{release: make(chan struct{})}
		a := startNode(t, w, "a", func(o *app.Options) {
			o.StepDownGrace = grace
			o.LeaderOnly = func(*app.Replica) ([]lifecycle.Component, error) { return []lifecycle.Component{hang}, nil }
		})
		defer hang.unblock()
		if l := leaderOf(t, a); l != a {
			t.Fatal("a does not lead")
		}
		b := startNode(t, w, "b", func(o *app.Options) { o.StepDownGrace = grace })
		synced(t, configDoc(2000), pods(1, 2), b)

		// a is cut off from the lease: its term ends, the hanger overstays,
		// b takes over.
		a.dead.Store(true)
		eventually(t, "b taking over", func() bool { st := b.r.Manager().Status(); return st.Leading && st.TermReady })
		eventually(t, "a's term ending", func() bool { return !a.r.Manager().Status().Leading })
		a.dead.Store(false)
		if st := a.r.Manager().Status(); len(st.Missing) != 0 || a.r.Healthy() != nil {
			t.Fatalf("a follower reports missing %v, healthy %v", st.Missing, a.r.Healthy())
		}
		// b is cut off in turn: a leads again, without its hanger.
		b.dead.Store(true)
		eventually(t, "a leading again", func() bool { return a.r.Manager().Status().Leading })
		b.dead.Store(false)
		st := a.r.Manager().Status()
		if len(st.Missing) != 1 || st.Missing[0] != "hanger" || st.TermReady {
			t.Fatalf("a leads term %d with missing %v, ready %v", st.Term, st.Missing, st.TermReady)
		}
		if err := a.r.Healthy(); err == nil || !strings.Contains(err.Error(), "hanger: still running from term") {
			t.Errorf("a.Healthy() = %v", err)
		}
		if err := a.r.Ready(); err == nil || !strings.Contains(err.Error(), "without leader-only hanger") {
			t.Errorf("a.Ready() = %v", err)
		}
		missTerm, since := st.Term, st.MissingSince
		// After the grace a resigns and b leads at once.
		eventually(t, "a resigning", func() bool { return !a.r.Manager().Status().Leading })
		resigned := time.Now()
		if got := resigned.Sub(since); got < grace || got > grace+100*time.Millisecond {
			t.Errorf("a resigned %v after it began to miss the hanger, want about %v", got, grace)
		}
		eventually(t, "b taking over again", func() bool { st := b.r.Manager().Status(); return st.Leading && st.TermReady })
		bst := b.r.Manager().Status()
		if bst.Term <= missTerm {
			t.Errorf("b leads term %d, not above a's %d", bst.Term, missTerm)
		}
		if took := bst.TermAcquired.Sub(resigned); took > 200*time.Millisecond {
			t.Errorf("b took over %v after a resigned, want at once", took)
		}
		if s := a.r.Manager().Status(); s.StepDowns != 1 || s.MissingTerms != 1 {
			t.Errorf("a's counters: step-downs %d, missing terms %d", s.StepDowns, s.MissingTerms)
		}
		hang.unblock()
	})
}
