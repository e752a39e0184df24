package election

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// TestClientGoClearsBatonLease replays what client-go's elector does when it releases
// (ReleaseOnCancel) after it lost the lease without noticing: its tryRelease reads the
// lease, which a Baton leader holds by now, and, still believing it leads, clears the
// holder with that version, through its LeaseLock (which keeps the annotations). The
// Baton leader's term ends; it may take the lease back at once (nobody else held it),
// but a Baton follower must not take it before an unknown holder's wait, since it
// cannot tell this clear from a release. The monitor checks no two terms overlapped.
func TestClientGoClearsBatonLease(t *testing.T) {
	h := newHarness(t, shared)
	lease := leaseName(t)
	hist := recordHistory(t, shared.Clientset(), namespace, lease)
	a := h.baton("cleared-a", lease, candidateOptions{timings: fast})
	waitFor(t, 10*time.Second, "cleared-a to lead", a.el.IsLeader)
	b := h.baton("cleared-b", lease, candidateOptions{timings: fast})
	waitFor(t, 10*time.Second, "cleared-b to follow", func() bool { return b.el.GetLeader() == a.who })
	first, _ := a.lastTerm()

	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: lease, Namespace: namespace},
		Client:     shared.Clientset().CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "stale-client-go"},
	}
	var cleared mtime
	for attempt := 0; ; attempt++ {
		old, _, err := lock.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n := metav1.NewTime(time.Now())
		cleared = now()
		err = lock.Update(context.Background(), resourcelock.LeaderElectionRecord{
			LeaderTransitions: old.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: n, AcquireTime: n,
		})
		if err == nil {
			break
		}
		if attempt == 10 {
			t.Fatalf("clear the lease as client-go's release does: %v", err)
		}
	}
	waitFor(t, fast.renew+slack, "cleared-a's first term to end", func() bool { return a.started()[0].ended != 0 })
	var next termRecord
	var who *batonCandidate
	waitFor(t, 5*time.Second, "a new term", func() bool {
		var ok bool
		next, who, ok = firstTermAfter([]*batonCandidate{a, b}, cleared)
		return ok
	})
	t.Logf("%s led again (term %d) %v after the clear", who.who, next.term, next.started.sub(cleared))
	if who != a {
		t.Errorf("%s took a lease cleared by a foreign writer at once, want only its last holder to", who.who)
	}
	if next.term <= first.term {
		t.Errorf("term %d after the clear is not above %d", next.term, first.term)
	}
	hist.checkAcquisition(t, who.who, next.term)
	l, err := shared.Clientset().CoordinationV1().Leases(namespace).Get(context.Background(), lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Annotations[leaderelection.MarkerAnnotation]; got != "holder:"+a.who {
		t.Errorf("marker annotation %q, want holder:%s", got, a.who)
	}
}

// TestHandOverRealAPIServer hands the lease around three Baton candidates with
// Elector.HandOver and measures each hand-over from the call to the named candidate's
// OnStartedLeading; the others never start a term meanwhile. The median and maximum
// are logged (go test -v -run TestHandOverRealAPIServer ./test/election/; rounds:
// BATON_HANDOVER_ROUNDS, default 20). The assertion is loose (a watch-driven hand-over,
// under a second on a loaded machine); the figure is the log line.
func TestHandOverRealAPIServer(t *testing.T) {
	rounds := 20
	if v, err := strconv.Atoi(os.Getenv("BATON_HANDOVER_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	h := newHarness(t, shared)
	lease := leaseName(t)
	hist := recordHistory(t, shared.Clientset(), namespace, lease)
	var cands []*batonCandidate
	for i := range 3 {
		cands = append(cands, h.baton(fmt.Sprintf("handover-%d", i), lease, candidateOptions{timings: fast}))
	}
	var leader *batonCandidate
	waitFor(t, 10*time.Second, "one leader", func() bool { leader = leaderOf(cands); return leader != nil })
	var took []time.Duration
	for round := range rounds {
		var target *batonCandidate
		for i, c := range cands {
			if c == leader {
				target = cands[(i+1)%len(cands)]
			}
		}
		waitFor(t, 5*time.Second, "followers to see "+leader.who, func() bool {
			for _, c := range cands {
				if c.el.GetLeader() != leader.who {
					return false
				}
			}
			return true
		})
		called := now()
		if err := leader.el.HandOver(context.Background(), target.who); err != nil {
			t.Fatalf("round %d: %s.HandOver(%s): %v", round, leader.who, target.who, err)
		}
		var next termRecord
		var who *batonCandidate
		waitFor(t, 5*time.Second, "the named candidate to lead", func() bool {
			var ok bool
			next, who, ok = firstTermAfter(cands, called)
			return ok
		})
		if who != target {
			t.Fatalf("round %d: %s took the lease handed to %s", round, who.who, target.who)
		}
		d := next.started.sub(called)
		took = append(took, d)
		if d > time.Second {
			t.Errorf("round %d: hand-over took %v, want well under a second", round, d)
		}
		hist.checkAcquisition(t, who.who, next.term)
		leader = target
	}
	t.Logf("HandOver to OnStartedLeading over %d rounds: median %v, max %v", rounds, median(took), maxOf(took))
	checkTermsIncrease(t, allTerms(cands))
	l, err := shared.Clientset().CoordinationV1().Leases(namespace).Get(context.Background(), lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(l.Spec.HolderIdentity, "") != leader.who || l.Spec.PreferredHolder != nil {
		t.Errorf("lease after the hand-overs: holder %q, preferredHolder %v", ptr.Deref(l.Spec.HolderIdentity, ""), l.Spec.PreferredHolder)
	}
}

// gate cuts a client off the API server: while closed, each request hangs until its
// context ends, as in a black-holed network.
type gate struct{ closed atomic.Bool }

func (g *gate) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if g.closed.Load() {
			<-r.Context().Done()
			return nil, r.Context().Err()
		}
		return next.RoundTrip(r)
	})
}

// TestClientGoLeaderCutOff cuts a client-go leader off the API server. With
// RetryPeriod 2s and RenewDeadline 2.5s (valid for client-go with LeaseDuration 3s)
// and ReleaseOnCancel, client-go's leader keeps its leader context for up to RetryPeriod
// + 2 × RenewDeadline = 7s after its last renew, past twice its lease duration. The
// Baton follower must not lead before that context ended: the monitor proves no
// overlap, and the takeover comes no sooner than three lease durations.
func TestClientGoLeaderCutOff(t *testing.T) {
	h := newHarness(t, shared)
	lease := leaseName(t)
	hist := recordHistory(t, shared.Clientset(), namespace, lease)
	cut := &gate{}
	cfg := rest.CopyConfig(shared.Config())
	cfg.WrapTransport = cut.wrap
	slow := timings{lease: 3 * time.Second, renew: 2500 * time.Millisecond, retry: 2 * time.Second}
	cg := h.clientGo("cut-client-go", lease, candidateOptions{timings: slow, release: true, cfg: cfg})
	waitFor(t, 10*time.Second, "cut-client-go to lead", cg.leading)
	bt := h.baton("cut-baton", lease, candidateOptions{timings: fast})
	waitFor(t, 10*time.Second, "cut-baton to follow", func() bool { return bt.el.GetLeader() == cg.who })
	cg.log.mu.Lock()
	cg.log.writes = nil
	cg.log.mu.Unlock()
	waitFor(t, 2*slow.retry+time.Second, "a renew of cut-client-go", func() bool { _, ok := cg.log.lastWrite(); return ok })
	cut.closed.Store(true)
	last, _ := cg.log.lastWrite()
	waitFor(t, 3*slow.lease+10*time.Second, "cut-baton to lead", func() bool { return len(bt.started()) > 0 })
	term, _ := bt.lastTerm()
	runs := cg.startedRuns()
	ended := runs[len(runs)-1].ended
	t.Logf("client-go's context ended %v after its last renew; Baton led %v after it",
		ended.sub(last.Sent), term.started.sub(last.Sent))
	if ended == 0 || ended > term.started {
		t.Errorf("Baton led while client-go's leader context was live (ended %d, Baton started %d)", ended, term.started)
	}
	if d := term.started.sub(last.Sent); d < 3*slow.lease {
		t.Errorf("Baton took a client-go lease %v after its last renew, want at least %v", d, 3*slow.lease)
	}
	hist.checkAcquisition(t, bt.who, term.term)
	cut.closed.Store(false)
}

// TestBatonLeaderCutOffClientGoFollower cuts a Baton leader off the API server while a
// client-go elector follows. client-go sees a renew only when renewTime's whole second
// changes, so it may date the lease up to a second early; with LeaseDuration −
// RenewDeadline ≥ 1s (here exactly 1s, renewing every 400ms) Baton's term still ends
// before client-go takes over: the monitor proves no overlap.
func TestBatonLeaderCutOffClientGoFollower(t *testing.T) {
	h := newHarness(t, shared)
	lease := leaseName(t)
	hist := recordHistory(t, shared.Clientset(), namespace, lease)
	cut := &gate{}
	cfg := rest.CopyConfig(shared.Config())
	cfg.WrapTransport = cut.wrap
	bt := h.baton("cut-baton-leader", lease, candidateOptions{timings: fast, cfg: cfg})
	waitFor(t, 10*time.Second, "cut-baton-leader to lead", bt.el.IsLeader)
	cg := h.clientGo("client-go-follower", lease, candidateOptions{timings: fast})
	waitFor(t, 10*time.Second, "client-go-follower to see the leader", func() bool { return cg.sawLeader(bt.who) })
	time.Sleep(fast.lease) // several renews, some within one second
	cut.closed.Store(true)
	waitFor(t, 3*fast.lease+10*time.Second, "client-go-follower to lead", cg.leading)
	first, _ := bt.lastTerm()
	run := cg.startedRuns()[0]
	t.Logf("Baton's term ended %v before client-go led", run.started.sub(first.ended))
	if first.ended == 0 || first.ended > run.started {
		t.Errorf("client-go led while Baton's term was live (ended %d, client-go started %d)", first.ended, run.started)
	}
	hist.checkAcquisition(t, bt.who, first.term)
	cut.closed.Store(false)
}
