package leaderelection

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/baton-dev/baton/pkg/k8s/incarnation"
)

// kubelet models the kubelets of the candidates' pods and is the candidates'
// DeathWatch (the randomized histories with the kubelet model are in test/chaos,
// TestChaosKubelet): each candidate is one container in a pod of its own; the model writes
// pod statuses (the pod gone after a force delete), and Dead closes its channel when
// incarnation.ProvesDead says the status proves the incarnation over. Its checker
// fails the test when a proof is taken for an incarnation whose process still runs.
type kubelet struct {
	t *testing.T

	// mu guards the fields below.
	mu      sync.Mutex
	pods    map[string]*corev1.Pod // by pod name; nil when gone
	running map[string]bool        // incarnations whose process runs
	changed chan struct{}          // closed and replaced on every change
}

func newKubelet(t *testing.T) *kubelet {
	return &kubelet{t: t, pods: map[string]*corev1.Pod{}, running: map[string]bool{}, changed: make(chan struct{})}
}

// incarnationOf returns the restart-th incarnation of pod's container, its nonce drawn
// from r.
func incarnationOf(pod string, r *rand.Rand) incarnation.Incarnation {
	return incarnation.Incarnation{PodNamespace: "default", PodName: pod, PodUID: "uid-" + pod, Container: "c",
		Nonce: fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64())}
}

// setLocked replaces pod's status with one container status and notifies the watches.
func (k *kubelet) setLocked(pod string, state, last corev1.ContainerState) {
	k.pods[pod] = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: pod, UID: types.UID("uid-" + pod)},
		Status:     corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: state, LastTerminationState: last}}},
	}
	close(k.changed)
	k.changed = make(chan struct{})
}

func terminatedWith(inc incarnation.Incarnation, message bool) corev1.ContainerState {
	t := &corev1.ContainerStateTerminated{ExitCode: 137}
	if message {
		t.Message = inc.TerminationLine() + "\n"
	}
	return corev1.ContainerState{Terminated: t}
}

// started marks inc's process running; the status shows it running after prev ended
// (prev zero: a first start).
func (k *kubelet) started(inc, prev incarnation.Incarnation, reportPrev bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.running[inc.String()] = true
	last := corev1.ContainerState{}
	if prev.Nonce != "" {
		last = terminatedWith(prev, reportPrev)
	}
	k.setLocked(inc.PodName, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, last)
}

// stopped marks inc's process stopped: only after this may a report prove it over.
func (k *kubelet) stopped(inc incarnation.Incarnation) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.running[inc.String()] = false
}

// report writes inc's container terminated (with the message when message).
func (k *kubelet) report(inc incarnation.Incarnation, message bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.setLocked(inc.PodName, terminatedWith(inc, message), corev1.ContainerState{})
}

// reportOlder writes a stale status: older's end, while a later incarnation runs.
func (k *kubelet) reportOlder(older incarnation.Incarnation) {
	k.report(older, true)
}

// forceDelete removes the pod object while its process may run.
func (k *kubelet) forceDelete(pod string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pods[pod] = nil
	close(k.changed)
	k.changed = make(chan struct{})
}

func (k *kubelet) Dead(ctx context.Context, s string) <-chan struct{} {
	dead := make(chan struct{})
	inc, err := incarnation.Parse(s)
	if err != nil {
		k.t.Errorf("Dead(%q): %v", s, err)
		return dead
	}
	go func() {
		for {
			k.mu.Lock()
			proven := incarnation.ProvesDead(inc, k.pods[inc.PodName])
			if proven && k.running[s] {
				k.t.Errorf("%v: a report was taken as proof that %s is over while its process runs", time.Now().Format(time.StampMilli), s)
			}
			changed := k.changed
			k.mu.Unlock()
			if proven {
				close(dead)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
	}()
	return dead
}

// deathCandidate is one container of the kubelet model: its current incarnation and
// elector.
type deathCandidate struct {
	pod  string
	inc  incarnation.Incarnation
	cand *candidate
}

func (cl *cluster) startIncarnation(k *kubelet, pod string, inc, prev incarnation.Incarnation, reportPrev bool) *deathCandidate {
	k.started(inc, prev, reportPrev)
	c := cl.start(pod, func(c *Config) { c.Incarnation, c.DeathWatch = inc.String(), k })
	return &deathCandidate{pod: pod, inc: inc, cand: c}
}

// kill stops the process (no release, as after SIGKILL) and waits until it has.
func (d *deathCandidate) kill(k *kubelet) {
	d.cand.cancel()
	<-d.cand.done
	k.stopped(d.inc)
}

// TestDeathSignal: a crashed leader whose container the kubelet reports terminated is
// replaced at once; without a report, after a force delete of its pod, or on a stale
// report of an older incarnation, the lease rules hold.
func TestDeathSignal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		report time.Duration // after the kill; 0 for none
		// want is the takeover time after the kill: the report delay, or the lease
		// duration from the last renew.
		fast bool
	}{
		{"reported at once", time.Nanosecond, true},
		{"reported late", 3 * time.Second, true},
		{"never reported", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := rand.New(rand.NewPCG(1, 2))
				k := newKubelet(t)
				cl := newCluster(t)
				defer cl.stop()
				a := cl.startIncarnation(k, "a", incarnationOf("a", r), incarnation.Incarnation{}, false)
				time.Sleep(time.Second)
				cl.startIncarnation(k, "b", incarnationOf("b", r), incarnation.Incarnation{}, false)
				time.Sleep(7*time.Second + 300*time.Millisecond)
				if cl.leader() != a.cand {
					t.Fatal("a does not lead")
				}
				a.kill(k)
				killed := time.Now()
				if tc.report > 0 {
					time.Sleep(tc.report)
					k.report(a.inc, true)
				}
				reported := time.Now()
				nl := cl.waitLeader(a.cand, 30*time.Second)
				_, started, _, _ := nl.snapshot()
				_, lastRenew, _ := a.cand.store.times()
				t.Logf("killed at +0, reported at +%v, next term at +%v (%v after the report; %v after the last renew)",
					reported.Sub(killed), started[0].Sub(killed), started[0].Sub(reported), started[0].Sub(lastRenew))
				if tc.fast {
					if d := started[0].Sub(reported); d > 50*time.Millisecond {
						t.Fatalf("next term %v after the report, want within 50ms", d)
					}
				} else if d := started[0].Sub(lastRenew); d < DefaultLeaseDuration {
					t.Fatalf("next term %v after the last renew without a report, want at least %v", d, DefaultLeaseDuration)
				}
				// Stats.DeathTakeovers counts the takeovers the report made early, and
				// only those.
				want := uint64(0)
				if tc.fast {
					want = 1
				}
				if got := nl.e.Stats().DeathTakeovers; got != want {
					t.Errorf("next leader's Stats.DeathTakeovers = %d, want %d", got, want)
				}
				if got := a.cand.e.Stats().DeathTakeovers; got != 0 {
					t.Errorf("killed leader's Stats.DeathTakeovers = %d, want 0", got)
				}
			})
		})
	}
}

// TestDeathSignalNoProof: a force delete of the leader's pod, a stale report of an older
// incarnation, and a restart of the same container never end a live leader's term.
func TestDeathSignalNoProof(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 4))
		k := newKubelet(t)
		cl := newCluster(t)
		defer cl.stop()
		old := incarnationOf("a", r)
		// a's container was restarted: the new incarnation runs, the old one's end is
		// its last state.
		k.started(old, incarnation.Incarnation{}, false)
		k.stopped(old)
		a := cl.startIncarnation(k, "a", incarnationOf("a", r), old, true)
		time.Sleep(time.Second)
		cl.startIncarnation(k, "b", incarnationOf("b", r), incarnation.Incarnation{}, false)
		time.Sleep(5 * time.Second)
		k.reportOlder(old) // a stale status: the old incarnation terminated
		time.Sleep(5 * time.Second)
		k.forceDelete("a")
		time.Sleep(time.Minute)
		if cl.leader() != a.cand {
			t.Fatal("a, alive and renewing, lost the lease")
		}
		terms, _, _, _ := a.cand.snapshot()
		if len(terms) != 1 {
			t.Fatalf("a led %d terms, want 1", len(terms))
		}
	})
}

// TestDeathSignalStaleIncarnation: an elector that keeps annotations as it finds them
// (client-go, a Baton version without the death signal) acquires the lease of a dead
// holder; the record still carries the dead holder's incarnation, but not bound to this
// acquisition: the report of that death must not end the new holder's lease.
func TestDeathSignalStaleIncarnation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(5, 6))
		k := newKubelet(t)
		cl := newCluster(t)
		defer cl.stop()
		a := cl.startIncarnation(k, "a", incarnationOf("a", r), incarnation.Incarnation{}, false)
		time.Sleep(time.Second)
		b := cl.startIncarnation(k, "b", incarnationOf("b", r), incarnation.Incarnation{}, false)
		time.Sleep(5 * time.Second)
		a.kill(k)
		cur, err := cl.mem.Get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if holderIncarnation(cur) != a.inc.String() {
			t.Fatalf("a's record names incarnation %q, want %q", holderIncarnation(cur), a.inc.String())
		}
		// y, an older Baton, acquires: new holder, times and transitions, the
		// annotation kept.
		now := time.Now()
		y := cur
		y.HolderIdentity, y.Marker = "y", holderMarker("y")
		y.AcquireTime, y.RenewTime = now, now
		y.LeaseTransitions++
		cl.mem.set(y)
		time.Sleep(time.Second)
		k.report(a.inc, true)
		time.Sleep(10 * time.Second)
		if terms, _, _, _ := b.cand.snapshot(); len(terms) != 0 {
			t.Fatalf("b took y's lease %v after y acquired, on the report of a's death", terms)
		}
		cl.waitLeader(a.cand, 10*time.Second) // y never renews: b takes it by the lease rules
		if _, started, _, _ := b.cand.snapshot(); len(started) == 0 || started[0].Sub(now) < DefaultLeaseDuration {
			t.Fatalf("b's terms started at %v, want one at least %v after y acquired", started, DefaultLeaseDuration)
		}
	})
}

// gatedDeath passes its inner DeathWatch's proofs on only once gate is closed.
type gatedDeath struct {
	inner DeathWatch
	gate  chan struct{}
}

func (g gatedDeath) Dead(ctx context.Context, inc string) <-chan struct{} {
	inner, out := g.inner.Dead(ctx, inc), make(chan struct{})
	go func() {
		for _, ch := range []<-chan struct{}{g.gate, inner} {
			select {
			case <-ch:
			case <-ctx.Done():
				return
			}
		}
		close(out)
	}()
	return out
}

// TestDeathSignalRestoredState (test/chaos TestChaosKubelet seed 258): a state first
// seen on a list may be a restored copy of an old one that hides later acquisitions,
// so a proof of its holder's death must not let a follower take it at once. a leads and
// crashes; b takes its lease on the report; c's watch had stalled, so c saw neither a's
// last renew nor b's acquisition; b is cut off; an etcd restore (revisions bumped)
// puts a's last state back; c re-lists and finds a's state with a's incarnation, proven
// dead. Taken at once, c would lead beside b, whose term runs until its renew deadline.
func TestDeathSignalRestoredState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(7, 8))
		k := newKubelet(t)
		cl := newCluster(t)
		defer cl.stop()
		a := cl.startIncarnation(k, "a", incarnationOf("a", r), incarnation.Incarnation{}, false)
		time.Sleep(time.Second)
		b := cl.startIncarnation(k, "b", incarnationOf("b", r), incarnation.Incarnation{}, false)
		gate := make(chan struct{})
		cInc := incarnationOf("c", r)
		k.started(cInc, incarnation.Incarnation{}, false)
		c := cl.start("c", func(cfg *Config) { cfg.Incarnation, cfg.DeathWatch = cInc.String(), gatedDeath{inner: k, gate: gate} })
		time.Sleep(5 * time.Second)
		if cl.leader() != a.cand {
			t.Fatal("a does not lead")
		}
		// c's watch stalls: it re-lists, then hears nothing more.
		c.store.mu.Lock()
		c.store.silent = true
		c.store.mu.Unlock()
		c.store.breakWatches()
		time.Sleep(3 * time.Second) // a renews, unseen by c
		last, err := cl.mem.Get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		a.kill(k)
		k.report(a.inc, true)
		if nl := cl.waitLeader(a.cand, time.Second); nl != b.cand {
			t.Fatalf("%v leads after a's reported crash, want b", nl)
		}
		b.cand.store.setMode(modeHang) // b is cut off: it leads until its renew deadline
		cl.mem.set(last)               // the restore: a's last state, at a new version
		c.store.mu.Lock()
		c.store.silent = false
		c.store.mu.Unlock()
		c.store.breakWatches() // c re-lists at once: a's state, new to it
		restored := time.Now()
		close(gate) // c's proof of a's death
		time.Sleep(DefaultRenewDeadline)
		if terms, _, _, _ := c.snapshot(); len(terms) != 0 {
			t.Fatalf("c led %v within %v of finding a's restored state: a proof of a's death let it take a state first seen on a list",
				terms, time.Since(restored))
		}
		nl := cl.waitLeader(b.cand, 2*DefaultLeaseDuration)
		if _, started, _, _ := nl.snapshot(); nl != c || started[0].Sub(restored) < DefaultLeaseDuration {
			t.Fatalf("%s leads from %v after the restore, want c, a lease duration (%v) after it found the state", nl.id, started[0].Sub(restored), DefaultLeaseDuration)
		}
	})
}

// sameIdentityRenewer is a client-go elector in the restarted container of a Baton
// holder (the same identity: a StatefulSet pod, an in-place image change): client-go
// keeps the acquireTime of a lease whose holder already has its identity, and its
// Update replaces only the spec, so Baton's marker and incarnation annotations stay as
// they were. It renews every RetryPeriod until stopped; it leads while it does.
type sameIdentityRenewer struct {
	stop chan struct{}
	once sync.Once
	done chan struct{}
	mu   sync.Mutex
	last time.Time // when its last renew landed
}

// renewAsClientGo renews the lease on mem as client-go would for its holder, once.
func renewAsClientGo(t *testing.T, mem *MemoryStore) time.Time {
	cur, err := mem.Get(context.Background())
	if err != nil {
		t.Errorf("client-go renewer: %v", err)
		return time.Time{}
	}
	now := time.Now()
	cur.RenewTime = wallClock(now)
	if _, err := mem.Update(context.Background(), cur); err != nil {
		t.Errorf("client-go renewer: %v", err)
	}
	return now
}

func startSameIdentityRenewer(t *testing.T, mem *MemoryStore) *sameIdentityRenewer {
	r := &sameIdentityRenewer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			at := renewAsClientGo(t, mem)
			r.mu.Lock()
			r.last = at
			r.mu.Unlock()
			select {
			case <-r.stop:
				return
			case <-time.After(DefaultRetryPeriod):
			}
		}
	}()
	return r
}

// end stops the renews (once; later calls only wait) and returns when the last landed.
func (r *sameIdentityRenewer) end() time.Time {
	r.once.Do(func() { close(r.stop) })
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// TestDeathSignalSameIdentityRenewer (issue 25, defect 2): Baton holder a crashes, its
// container restarts with the same identity running a client-go build, which renews
// at once, keeping a's acquireTime and annotations; then the kubelet reports a's old
// container terminated. The record still names a's incarnation with a's acquireTime,
// but the renew was not a's: b must not take the lease from the live client-go leader
// on that report, and takes it by the lease rules once the renews stop.
func TestDeathSignalSameIdentityRenewer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(9, 10))
		k := newKubelet(t)
		cl := newCluster(t)
		defer cl.stop()
		a := cl.startIncarnation(k, "a", incarnationOf("a", r), incarnation.Incarnation{}, false)
		time.Sleep(time.Second)
		b := cl.startIncarnation(k, "b", incarnationOf("b", r), incarnation.Incarnation{}, false)
		time.Sleep(5 * time.Second)
		if cl.leader() != a.cand {
			t.Fatal("a does not lead")
		}
		a.kill(k)
		renewer := startSameIdentityRenewer(t, cl.mem)
		defer renewer.end()
		time.Sleep(100 * time.Millisecond)
		// The status after the restart: a's old container terminated with its line.
		k.started(incarnationOf("a", r), a.inc, true)
		time.Sleep(30 * time.Second)
		if terms, started, _, _ := b.cand.snapshot(); len(terms) != 0 {
			t.Fatalf("b led terms %v from %v while a's restarted container renewed the lease as client-go", terms, started)
		}
		last := renewer.end()
		nl := cl.waitLeader(a.cand, 4*DefaultLeaseDuration)
		if _, started, _, _ := nl.snapshot(); nl != b.cand || started[0].Sub(last) < DefaultLeaseDuration {
			t.Fatalf("%s leads from %v after the last client-go renew, want b, at least %v after it",
				nl.id, started[0].Sub(last), DefaultLeaseDuration)
		}
		if got := b.cand.e.Stats().DeathTakeovers; got != 0 {
			t.Errorf("b's Stats.DeathTakeovers = %d, want 0", got)
		}
	})
}

// TestDeathProofMovesOnlyTheStateItFound (issue 25, defect 2): a proof moves only the
// Lease state observed when it arrived. b follows only while a crashes and is reported;
// a write of a's record that lands after the proof (a renew of a's, sent before the
// kill and held on the way) is not taken on the proof: b, campaigning again, waits it
// out by the lease rules.
func TestDeathProofMovesOnlyTheStateItFound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(11, 12))
		k := newKubelet(t)
		cl := newCluster(t)
		defer cl.stop()
		a := cl.startIncarnation(k, "a", incarnationOf("a", r), incarnation.Incarnation{}, false)
		time.Sleep(time.Second)
		binc := incarnationOf("b", r)
		k.started(binc, incarnation.Incarnation{}, false)
		b := cl.start("b", func(c *Config) { c.Incarnation, c.DeathWatch, c.FollowOnly = binc.String(), k, true })
		time.Sleep(5 * time.Second)
		a.kill(k)
		cur, err := cl.mem.Get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		k.report(a.inc, true)
		time.Sleep(100 * time.Millisecond) // b takes in the proof
		// a's renew held on the way lands: a's own write, bound to a's incarnation.
		held := time.Now()
		cur.RenewTime = wallClock(held)
		cur.Incarnation = boundIncarnation(cur.AcquireTime, cur.RenewTime, a.inc.String())
		cl.mem.set(cur)
		time.Sleep(100 * time.Millisecond)
		b.e.SetCampaigning(true)
		nl := cl.waitLeader(a.cand, 4*DefaultLeaseDuration)
		if _, started, _, _ := nl.snapshot(); nl != b || started[0].Sub(held) < DefaultLeaseDuration {
			t.Fatalf("%s leads from %v after a's late renew landed, want b, at least %v after it (the lease rules)",
				nl.id, started[0].Sub(held), DefaultLeaseDuration)
		}
	})
}
