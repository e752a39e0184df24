package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/baton-dev/baton/pkg/k8s/incarnation"
	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// Fault and event kinds of the kubelet model (counted with the others).
const (
	fStaleReport    = "stale status: an older incarnation terminated"
	fForceDelete    = "pod force-deleted while its process runs"
	fPodWatchBroken = "pod watch broken"
	fReportPrompt   = "stop reported at once"
	fReportLate     = "stop reported late"
	fReportNever    = "stop never reported"
	fReportNoLine   = "stop reported without the incarnation's line"
	fReportPodGone  = "stop of a force-deleted pod's process (never reported)"
	fFinalCrash     = "leader crashed after the settle checks"
)

// Report policies of a stopped process.
const (
	reportPrompt = "at once"
	reportLate   = "late"
	reportNever  = "never"
	reportNoLine = "without the line"
)

// reportCounters are the counter kinds of the report policies.
var reportCounters = map[string]string{
	reportPrompt: fReportPrompt, reportLate: fReportLate, reportNever: fReportNever, reportNoLine: fReportNoLine,
}

// podWatchRetry is the pause before a broken pod watch is opened again (the Watcher's
// first retry).
const podWatchRetry = time.Second

// deathBound is the liveness bound: a follower takes the lease of a crashed leader
// within this time of the status that proves the crash.
const deathBound = 100 * time.Millisecond

// container is the container name of every candidate's pod.
const container = "app"

// proc is one process: one incarnation of a candidate's container.
type proc struct {
	who    string // identity#n
	cand   int
	inc    incarnation.Incarnation
	s      string // inc.String(), the elector's Config.Incarnation
	start  time.Time
	stop   time.Time // zero while it runs
	policy string    // how its stop is reported
	// noLine: its terminated state never carries its line (the report never came, or
	// its termination message was lost).
	noLine   bool
	reported time.Time // first status that carries its line, zero if none yet
}

func (p *proc) runningAt(t time.Time) bool { return p.stop.IsZero() || p.stop.After(t) }

// podEvent is one state of a pod as a watch delivers it: nil when the pod is gone.
type podEvent struct {
	at  time.Time
	pod *corev1.Pod
}

// podState is the pod of one candidate, across force deletes (a new generation, and
// UID, after each).
type podState struct {
	name   string
	gen    int
	gone   bool    // force-deleted: no status until the next process starts in a new pod
	cur    *proc   // running process
	last   *proc   // last stopped process of this generation
	incs   []*proc // processes of this generation, oldest first
	obj    *corev1.Pod
	events []podEvent // append-only, across generations
}

// proofRec is one proof a death watch delivered to an elector.
type proofRec struct {
	watcher string // incarnation of the elector it was delivered to
	inc     string // the incarnation proven over
	at      time.Time
	live    bool // the process of inc ran then: the report was false
}

// finalCrash is the leader crash played after the settle checks, for liveness.
type finalCrash struct {
	who      string
	inc      string
	killedAt time.Time
	p        *proc
}

// kubelet models the kubelets of the candidates' pods and is the candidates' death
// watch (leaderelection.DeathWatch): each candidate is one container in a pod of its
// own, each of its incarnations a process with a fresh nonce. A status reports a
// process terminated only after it stopped: at once, late, never, or without its
// line; the status may go back to an older incarnation's end (a stale status), the pod
// object may be force-deleted while the process runs (the next process runs in a new
// pod, with a new UID). Each elector's pod watch delivers the statuses, late while the
// candidate's watches lag, held while it is paused, broken while it is partitioned or
// the pod watch is broken (then opened again after a second, from the current
// status); incarnation.ProvesDead decides what a status proves. Safe for concurrent
// use.
type kubelet struct {
	h    *history
	seed uint64
	ld   time.Duration
	// pods, one per candidate, is fixed at creation, and so are their names; mu guards
	// the rest of each podState.
	pods []*podState

	// mu guards the fields below.
	mu       sync.Mutex
	procs    map[string]*proc // by incarnation string
	proofs   []proofRec
	changed  chan struct{} // closed and replaced on every pod event
	epoch    []int         // per candidate: bumped when its pod watches break
	downTill []time.Time   // per candidate: its pod watches fail until then
	final    *finalCrash
	// forced holds, per candidate, the report delay of its next stop (the final
	// crash: reported at once, with the line, after that delay).
	forced map[int]time.Duration
}

func newKubelet(h *history, seed int64) *kubelet {
	k := &kubelet{h: h, seed: uint64(seed), ld: h.cfg.LeaseDuration, procs: map[string]*proc{}, changed: make(chan struct{}),
		epoch: make([]int, h.n), downTill: make([]time.Time, h.n), forced: map[int]time.Duration{}}
	for i := range h.n {
		k.pods = append(k.pods, &podState{name: fmt.Sprintf("c%d", i)})
	}
	return k
}

// procRand is the source of one process's nonce and report policy.
func (k *kubelet) procRand(cand, inc int) *rand.Rand {
	return rand.New(rand.NewPCG(k.seed*31+uint64(cand), 0x6b75+uint64(inc)))
}

// started starts process inc of candidate cand and returns its incarnation: in a new
// pod after a force delete, with the status showing it running after the last one.
func (k *kubelet) started(cand, inc int, who string) string {
	r := k.procRand(cand, inc)
	k.mu.Lock()
	defer k.mu.Unlock()
	ps := k.pods[cand]
	if ps.gone || ps.gen == 0 {
		ps.gen++
		ps.gone, ps.last, ps.incs = false, nil, nil
	}
	p := &proc{who: who, cand: cand, start: time.Now(), inc: incarnation.Incarnation{
		PodNamespace: "default", PodName: ps.name, PodUID: fmt.Sprintf("uid-%s-%d", ps.name, ps.gen), Container: container,
		Nonce: fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64()),
	}}
	p.s = p.inc.String()
	ps.cur = p
	ps.incs = append(ps.incs, p)
	k.procs[p.s] = p
	k.postLocked(ps, nil)
	return p.s
}

// stopped marks the process of cand stopped and schedules its report as its policy
// says: only from now on may a status prove it over.
func (k *kubelet) stopped(cand, inc int) {
	r := k.procRand(cand, inc)
	r.Uint64()
	r.Uint64() // the nonce's draws
	k.mu.Lock()
	defer k.mu.Unlock()
	ps := k.pods[cand]
	p := ps.cur
	if p == nil {
		return
	}
	p.stop = time.Now()
	ps.cur = nil
	if ps.gone {
		p.policy, p.noLine = reportNever, true
		k.h.count.add(fReportPodGone, 1)
		return
	}
	ps.last = p
	var delay time.Duration
	pick := r.IntN(20)
	switch {
	case pick < 8:
		p.policy, delay = reportPrompt, time.Duration(r.Int64N(int64(50*time.Millisecond)))
	case pick < 14:
		p.policy, delay = reportLate, time.Duration((0.2+r.Float64()*1.8)*float64(k.ld))
	case pick < 18:
		p.policy, p.noLine = reportNever, true
	default:
		p.policy, p.noLine, delay = reportNoLine, true, time.Duration(r.Int64N(int64(50*time.Millisecond)))
	}
	if d, ok := k.forced[cand]; ok {
		delete(k.forced, cand)
		p.policy, p.noLine, delay = reportPrompt, false, d
	}
	k.h.count.add(reportCounters[p.policy], 1)
	if p.policy == reportNever {
		return
	}
	gen := ps.gen
	time.AfterFunc(delay, func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if ps.gen == gen && !ps.gone {
			k.postLocked(ps, nil)
		}
	})
}

// terminated is the terminated state of p: its line in the message unless p.noLine.
func terminated(p *proc) corev1.ContainerState {
	t := &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}
	if !p.noLine {
		t.Message = p.inc.TerminationLine() + "\n"
	}
	return corev1.ContainerState{Terminated: t}
}

// postLocked writes the status of ps as the kubelet sees it (stale, when not nil: the
// end of that older process as the current state) and hands it to the pod watches.
func (k *kubelet) postLocked(ps *podState, stale *proc) {
	cs := corev1.ContainerStatus{Name: container}
	var shown *proc
	switch {
	case stale != nil:
		cs.State, shown = terminated(stale), stale
	case ps.cur != nil:
		cs.State.Running = &corev1.ContainerStateRunning{}
		if ps.last != nil {
			cs.LastTerminationState, shown = terminated(ps.last), ps.last
		}
	case ps.last != nil:
		cs.State, shown = terminated(ps.last), ps.last
	}
	if shown != nil && !shown.noLine && shown.reported.IsZero() {
		shown.reported = time.Now()
	}
	ps.obj = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: ps.name, UID: types.UID(fmt.Sprintf("uid-%s-%d", ps.name, ps.gen))},
		Status:     corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}},
	}
	k.eventLocked(ps)
}

func (k *kubelet) eventLocked(ps *podState) {
	ps.events = append(ps.events, podEvent{at: time.Now(), pod: ps.obj})
	close(k.changed)
	k.changed = make(chan struct{})
}

// staleReport writes the end of an older process of cand's pod as its current state
// (a stale status after a restart: the process that runs, or the last one stopped, is
// newer); it reports whether there was one. pick picks it.
func (k *kubelet) staleReport(cand int, pick int) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	ps := k.pods[cand]
	var older []*proc
	for _, p := range ps.incs {
		if !p.stop.IsZero() && (p != ps.last || ps.cur != nil) {
			older = append(older, p)
		}
	}
	if ps.gone || len(older) == 0 {
		return false
	}
	k.postLocked(ps, older[pick%len(older)])
	return true
}

// forceDelete removes cand's pod object while its process runs; it reports whether
// there was one.
func (k *kubelet) forceDelete(cand int) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	ps := k.pods[cand]
	if ps.gone || ps.cur == nil {
		return false
	}
	ps.gone, ps.obj = true, nil
	k.eventLocked(ps)
	return true
}

// breakWatches breaks the pod watches of cand (all for -1); they fail until until.
func (k *kubelet) breakWatches(cand int, until time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := range k.epoch {
		if cand == -1 || i == cand {
			k.epoch[i]++
			if until.After(k.downTill[i]) {
				k.downTill[i] = until
			}
		}
	}
	close(k.changed) // the watches see the break at once
	k.changed = make(chan struct{})
}

// watchState is the state of cand's pod watches: the break epoch, and whether a watch
// can be open now.
func (k *kubelet) watchState(c *candidate) (int, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.epoch[c.idx], !time.Now().Before(k.downTill[c.idx]) && !c.store.isPartitioned()
}

// deathWatch is one incarnation's death watch.
type deathWatch struct {
	k     *kubelet
	c     *candidate
	who   string
	seed  uint64
	calls uint64 // Dead calls (the elector makes them from one goroutine)
}

var _ leaderelection.DeathWatch = (*deathWatch)(nil)

func (k *kubelet) deathWatch(c *candidate, who string, inc int) *deathWatch {
	return &deathWatch{k: k, c: c, who: who, seed: (k.seed*31+uint64(c.idx))*1009 + uint64(inc)}
}

// Dead follows the pod of s (see kubelet) until a status proves s over or ctx ends.
func (w *deathWatch) Dead(ctx context.Context, s string) <-chan struct{} {
	dead := make(chan struct{})
	inc, err := incarnation.Parse(s)
	if err != nil {
		w.k.h.addErr("%s: death watch of %q: %v", w.who, s, err)
		return dead
	}
	var ps *podState
	for _, p := range w.k.pods {
		if p.name == inc.PodName {
			ps = p
		}
	}
	if ps == nil {
		w.k.h.addErr("%s: death watch of %q: no such pod", w.who, s)
		return dead
	}
	w.calls++
	net := rand.New(rand.NewPCG(w.seed, 0xdead+w.calls))
	go w.follow(ctx, ps, inc, s, net, dead)
	return dead
}

// follow lists ps and watches it, again after each break, until a status proves inc
// over (then it closes dead) or ctx ends.
func (w *deathWatch) follow(ctx context.Context, ps *podState, inc incarnation.Incarnation, s string, net *rand.Rand, dead chan struct{}) {
	latency := func() time.Duration { return time.Duration(net.Int64N(int64(netLatency))) }
	k := w.k
	for {
		if !sleep(ctx, latency()) || !w.c.store.holdPaused(ctx, net) {
			return
		}
		epoch, up := k.watchState(w.c)
		if !up {
			if !sleep(ctx, podWatchRetry) {
				return
			}
			continue
		}
		k.mu.Lock()
		pos, cur := len(ps.events), ps.obj // the list: the current state
		k.mu.Unlock()
		if w.proves(inc, s, cur) {
			close(dead)
			return
		}
		for {
			k.mu.Lock()
			for len(ps.events) <= pos && k.epoch[w.c.idx] == epoch {
				changed := k.changed
				k.mu.Unlock()
				select {
				case <-changed:
				case <-ctx.Done():
					return
				}
				k.mu.Lock()
			}
			if k.epoch[w.c.idx] != epoch {
				k.mu.Unlock()
				break // broken: what comes until it is open again is lost
			}
			ev := ps.events[pos]
			pos++
			k.mu.Unlock()
			if !sleep(ctx, w.c.store.lagNow()+latency()) || !w.c.store.holdPaused(ctx, net) {
				return
			}
			if e, up := k.watchState(w.c); e != epoch || !up {
				break // broken since it was opened: the event is lost
			}
			if w.proves(inc, s, ev.pod) {
				close(dead)
				return
			}
		}
		if !sleep(ctx, podWatchRetry) {
			return
		}
	}
}

// proves reports whether pod proves inc over, and records the proof with whether its
// process still ran.
func (w *deathWatch) proves(inc incarnation.Incarnation, s string, pod *corev1.Pod) bool {
	if !incarnation.ProvesDead(inc, pod) {
		return false
	}
	k := w.k
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	p := k.procs[s]
	k.proofs = append(k.proofs, proofRec{watcher: w.who, inc: s, at: now, live: p == nil || p.runningAt(now)})
	return true
}

// downForever is the down time of the final crash: until the end of the history (its
// container does not come back, not even as a client-go build).
const downForever = 1 << 62

// crashLeader plays the final crash: the leader's process is killed (nothing it sends
// any more reaches the server, so no release), and its stop is reported d after it
// stopped. It reports false when there is no single leader to crash, or its pod was
// force-deleted (no status can report the crash).
func (r *runner) crashLeader() bool {
	k := r.h.kube
	r.h.mu.Lock()
	last := r.h.probes[len(r.h.probes)-1]
	r.h.mu.Unlock()
	if len(last.leaders) != 1 {
		return false
	}
	id, _, _ := strings.Cut(last.leaders[0], "#")
	i, err := strconv.Atoi(strings.TrimPrefix(id, "c"))
	if err != nil {
		return false
	}
	c := r.cands[i]
	d := time.Duration(rand.New(rand.NewPCG(k.seed, 0xf1a1)).Int64N(int64(time.Second)))
	k.mu.Lock()
	p := k.pods[i].cur
	if k.pods[i].gone {
		p = nil // force-deleted: its stop cannot be reported
	}
	if p != nil {
		k.forced[i] = d
	}
	k.mu.Unlock()
	if p == nil {
		return false
	}
	c.store.partition(true, false)
	select {
	case c.restart <- downForever:
	default:
		k.mu.Lock()
		delete(k.forced, i)
		k.mu.Unlock()
		return false
	}
	r.h.count.add(fFinalCrash, 1)
	r.h.logFault(fFinalCrash, "%s killed; its stop reported %v after it stopped", last.leaders[0], d)
	k.mu.Lock()
	k.final = &finalCrash{who: p.who, inc: p.s, killedAt: time.Now(), p: p}
	k.mu.Unlock()
	return true
}

// kubeSnapshot is what the checker reads of the kubelet model.
type kubeSnapshot struct {
	procs  map[string]proc
	proofs []proofRec
	final  *finalCrash
	finalP proc
}

func (k *kubelet) snapshot() kubeSnapshot {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := kubeSnapshot{procs: make(map[string]proc, len(k.procs)), proofs: slices.Clone(k.proofs), final: k.final}
	for key, p := range k.procs {
		s.procs[key] = *p
	}
	if k.final != nil {
		s.finalP = *k.final.p
	}
	return s
}

// Violation kinds of the kubelet model.
const (
	vProofLive     = "a report taken as proof for a live incarnation"
	vDeathLive     = "lease taken on a death proof from a live incarnation"
	vDeathClientGo = "lease taken early from a live same-identity client-go renewer"
	vDeathUnproven = "lease taken early without a proof of its holder's death"
	vDeathTooLate  = "no takeover within the bound after the crash was reported"
	vFinalNoLeader = "no leader after the final crash"
)

// holderIncarnation is the incarnation recorded with r's acquireTime and renewTime (as
// the elector binds it to its own write), "" if none.
func holderIncarnation(r leaderelection.LeaseRecord) string {
	at, rest, ok := strings.Cut(r.Incarnation, " ")
	if !ok || at != r.AcquireTime.UTC().Format(time.RFC3339Nano) {
		return ""
	}
	renewed, inc, ok := strings.Cut(rest, " ")
	if !ok || inc == "" || renewed != r.RenewTime.UTC().Format(time.RFC3339Nano) {
		return ""
	}
	return inc
}

// checkKubelet: every proof delivered was about a process that had stopped; every
// takeover earlier than the lease rules allow (a write that took the lease from
// another holder less than LeaseDuration/(1+ε) after that holder's state was written,
// ε the clock tolerance when clocks are skewed: no follower's wait can be shorter) was
// on a proof delivered to the taker before the write landed, of the holder's recorded
// incarnation, whose process had stopped; after the final crash, the next term began
// within deathBound of the status that reported it.
func checkKubelet(h *history, terms []termRec, faults []logEntry, res *result) {
	if h.kube == nil {
		return
	}
	ks := h.kube.snapshot()
	res.proofs = len(ks.proofs)
	for _, p := range ks.proofs {
		if p.live {
			pr := ks.procs[p.inc]
			res.fail(vProofLive, "at %s the death watch of %s was given a status proving %s (%s) over while its process ran (started %s, stopped %s)",
				h.rel(p.at), p.watcher, p.inc, pr.who, h.rel(pr.start), h.rel(pr.stop))
		}
	}
	eps := 0.0
	if h.skew.on {
		eps = h.cfg.ClockTolerance()
	}
	early := time.Duration(float64(h.cfg.LeaseDuration) / (1 + eps))
	for _, l := range h.srv.takeoverLog() {
		gap := l.at.Sub(l.prevAt)
		if gap >= early {
			continue
		}
		if restoredBetween(faults, l.prevAt.Add(-2*h.cfg.LeaseDuration), l.at) {
			res.notes = append(res.notes, fmt.Sprintf("%s took the lease from %s at %s, %v after its state was written, across a restore (not judged)",
				l.writer, l.prev.HolderIdentity, h.rel(l.at), gap))
			continue
		}
		res.deathTakeovers++
		if strings.HasSuffix(l.prevWriter, clientGoSuffix) {
			res.fail(vDeathClientGo, "%s took the lease (rv %s) at %s, %v after %s renewed it (rv %s) as client-go, keeping %s's annotations",
				l.writer, l.rec.ResourceVersion, h.rel(l.at), gap, l.prevWriter, l.prev.ResourceVersion, l.prev.HolderIdentity)
			continue
		}
		inc := holderIncarnation(l.prev)
		pr, known := ks.procs[inc]
		step := fmt.Sprintf("%s took the lease (rv %s) at %s, %v after %s's state (rv %s) was written, before the lease rules allow",
			l.writer, l.rec.ResourceVersion, h.rel(l.at), gap, l.prev.HolderIdentity, l.prev.ResourceVersion)
		switch {
		case !known:
			res.fail(vDeathUnproven, "%s: the record names no incarnation of a process (%q)", step, l.prev.Incarnation)
		case pr.runningAt(l.at):
			res.fail(vDeathLive, "%s: the holder's incarnation %s (%s) ran until %s%s", step, pr.who, inc, h.rel(pr.stop),
				proofsOf(h, ks.proofs, l.writer, l.at))
		case !proven(ks.proofs, l.writer, inc, l.at):
			res.fail(vDeathUnproven, "%s: %s (stopped at %s) was never proven over to %s%s", step, pr.who, h.rel(pr.stop), l.writer,
				proofsOf(h, ks.proofs, l.writer, l.at))
		}
	}
	if ks.final == nil {
		return
	}
	res.finalCrashes++
	rep := ks.finalP.reported
	var next *termRec
	for i := range terms {
		t := &terms[i]
		if t.who != ks.final.who && t.start.After(ks.final.killedAt) && (next == nil || t.start.Before(next.start)) {
			next = t
		}
	}
	switch {
	case rep.IsZero():
		res.fail(vUnexpected, "the final crash of %s was not reported", ks.final.who)
	case next == nil:
		res.fail(vFinalNoLeader, "%s killed at %s, stopped at %s, reported at %s: no term started after it",
			ks.final.who, h.rel(ks.final.killedAt), h.rel(ks.finalP.stop), h.rel(rep))
	default:
		d := next.start.Sub(rep)
		res.finalDelay = d
		if d > deathBound || d < 0 {
			res.fail(vDeathTooLate, "%s killed at %s, stopped at %s, reported at %s: %s term %d started at %s, %v after the report (bound %v)",
				ks.final.who, h.rel(ks.final.killedAt), h.rel(ks.finalP.stop), h.rel(rep), next.who, next.term, h.rel(next.start), d, deathBound)
		}
	}
}

// proven reports whether watcher had been given a proof of inc by at.
func proven(proofs []proofRec, watcher, inc string, at time.Time) bool {
	for _, p := range proofs {
		if p.watcher == watcher && p.inc == inc && !p.at.After(at) {
			return true
		}
	}
	return false
}

// proofsOf lists the proofs watcher had been given by at.
func proofsOf(h *history, proofs []proofRec, watcher string, at time.Time) string {
	var out []string
	for _, p := range proofs {
		if p.watcher == watcher && !p.at.After(at) {
			out = append(out, fmt.Sprintf("%s at %s", p.inc, h.rel(p.at)))
		}
	}
	if len(out) == 0 {
		return "; it had been given no proof"
	}
	return "; proofs it had been given: " + strings.Join(out, ", ")
}

// TestCheckerKubelet feeds checkKubelet hand-made histories: a takeover earlier than
// the lease rules allow must be on a proof, given to the taker, of the holder's
// recorded incarnation, whose process had stopped; a proof of a live process fails; the
// final crash must be taken over within deathBound of its report.
func TestCheckerKubelet(t *testing.T) {
	incOf := func(nonce byte) string {
		return incarnation.Incarnation{PodNamespace: "default", PodName: "c1", PodUID: "uid-c1-1", Container: container,
			Nonce: strings.Repeat(string(rune('a'+nonce)), 32)}.String()
	}
	old, cur := incOf(0), incOf(1)
	held := leaderelection.LeaseRecord{HolderIdentity: "c1", AcquireTime: sec(10), RenewTime: sec(10), ResourceVersion: "7",
		Incarnation: sec(10).UTC().Format(time.RFC3339Nano) + " " + sec(10).UTC().Format(time.RFC3339Nano) + " " + cur}
	type crash struct{ killed, reported, next float64 }
	tests := []struct {
		name     string
		gap      float64 // the takeover at 50, this long after the holder's state
		stop     float64 // the holder's process stopped at, 0 for never
		proofs   []proofRec
		final    *crash
		want     []string
		takeover int
		// prevWriter wrote the holder's state; "" for its incarnation c1#1.
		prevWriter string
	}{
		{"on a proof of the stopped holder", 1, 48, []proofRec{{watcher: "c0#0", inc: cur, at: sec(49.5)}}, nil, nil, 1, ""},
		{"from a live holder", 1, 0, []proofRec{{watcher: "c0#0", inc: old, at: sec(49.5)}}, nil, []string{vDeathLive}, 1, ""},
		{"without a proof", 1, 48, nil, nil, []string{vDeathUnproven}, 1, ""},
		{"on a proof of an older incarnation", 1, 48, []proofRec{{watcher: "c0#0", inc: old, at: sec(49)}}, nil, []string{vDeathUnproven}, 1, ""},
		{"on a proof given to another candidate", 1, 48, []proofRec{{watcher: "c2#0", inc: cur, at: sec(49)}}, nil, []string{vDeathUnproven}, 1, ""},
		{"on a proof that came after the write", 1, 48, []proofRec{{watcher: "c0#0", inc: cur, at: sec(50.1)}}, nil, []string{vDeathUnproven}, 1, ""},
		{"from a same-identity client-go renewer", 1, 48, []proofRec{{watcher: "c0#0", inc: cur, at: sec(49.5)}}, nil, []string{vDeathClientGo}, 1, "c1#1" + clientGoSuffix},
		{"after the lease rules allow", 16, 0, nil, nil, nil, 0, ""},
		{"a proof of a live process", 16, 0, []proofRec{{watcher: "c0#0", inc: cur, at: sec(49), live: true}}, nil, []string{vProofLive}, 0, ""},
		{"final crash taken over in time", 16, 48, nil, &crash{140, 140.2, 140.25}, nil, 0, ""},
		{"final crash taken over late", 16, 48, nil, &crash{140, 140.2, 141}, []string{vDeathTooLate}, 0, ""},
		{"final crash never taken over", 16, 48, nil, &crash{140, 140.2, 0}, []string{vFinalNoLeader}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			settled := &termRec{who: "c0#0", term: 5, start: sec(90), end: sec(150)}
			terms := []*termRec{settled}
			h := synthetic(terms, nil)
			h.srv = newMemServer("t")
			prevWriter := tt.prevWriter
			if prevWriter == "" {
				prevWriter = "c1#1"
			}
			h.srv.takeovers = []takeover{{writer: "c0#0", at: sec(50), prev: held, prevAt: sec(50 - tt.gap), prevWriter: prevWriter,
				rec: leaderelection.LeaseRecord{HolderIdentity: "c0", ResourceVersion: "8"}}}
			h.kube = newKubelet(h, 1)
			p := &proc{who: "c1#1", cand: 1, s: cur, start: sec(20)}
			if tt.stop > 0 {
				p.stop = sec(tt.stop)
			}
			h.kube.procs[cur] = p
			h.kube.procs[old] = &proc{who: "c1#0", cand: 1, s: old, start: sec(1), stop: sec(19)}
			h.kube.proofs = tt.proofs
			if c := tt.final; c != nil {
				settled.end = sec(c.killed)
				fp := &proc{who: "c0#0", s: "final", start: sec(0), stop: sec(c.killed), reported: sec(c.reported)}
				h.kube.final = &finalCrash{who: "c0#0", inc: "final", killedAt: sec(c.killed), p: fp}
				if c.next > 0 {
					h.terms = append(h.terms, &termRec{who: "c1#2", term: 9, start: sec(c.next), end: sec(200)})
				}
			}
			res := check(h)
			if got := kinds(res); !slices.Equal(got, tt.want) {
				t.Errorf("violations %v, want %v\n%s", got, tt.want, report(h, res))
			}
			if res.deathTakeovers != tt.takeover {
				t.Errorf("%d takeovers judged as on a death proof, want %d", res.deathTakeovers, tt.takeover)
			}
		})
	}
}
