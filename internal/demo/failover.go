package demo

import (
	"fmt"
	"time"
)

// failoverRun is one failover in progress: what it found so far and what
// it checked.
type failoverRun struct {
	e       *engine
	f       Failover
	old     *node
	oldTerm uint64
	want    newest // the newest state the new leader must hold
	// stepDowns is the old leader's count of step-downs before the fault
	// (a replica stuck in an earlier hang fault has resigned before).
	stepDowns uint64
}

// fail records a failed check.
func (r *failoverRun) fail(name, format string, args ...any) {
	r.f.Checks = append(r.f.Checks, Check{Name: name, Detail: fmt.Sprintf(format, args...)})
}

// worldChanged records a world change that could not be made; it returns
// the abort reason, "" when err is nil.
func (r *failoverRun) worldChanged(err error) string {
	if err == nil {
		return ""
	}
	r.fail("world change", "%v", err)
	return err.Error()
}

// step shows what the failover does now.
func (r *failoverRun) step(format string, args ...any) {
	r.e.view.setStep("failover %d/%d: %s", r.f.N, r.e.opts.Failovers, fmt.Sprintf(format, args...))
}

// failover runs one failover and checks it; abort is set when the run
// cannot go on (no leader).
func (e *engine) failover(i int, fault Fault, invalid bool) (Failover, string) {
	r := &failoverRun{e: e, f: Failover{N: i + 1, Fault: fault, InvalidConfig: invalid}}
	for _, phase := range []func() string{r.lead, r.changeBeforeFault, r.fault, r.changeWhileLeaderless, r.newLeader, r.recover} {
		if abort := phase(); abort != "" {
			return r.f, abort
		}
	}
	return r.f, ""
}

// lead waits for the leader, lets it lead for the dwell while the pods
// change under it, and checks that it published the change.
func (r *failoverRun) lead() string {
	e, o := r.e, r.e.opts
	old, oldTerm, ok := e.waitLeader(0)
	if !ok {
		r.fail("leader before the fault", "no single ready leader within %v", o.StepTimeout)
		return "no leader"
	}
	r.old, r.oldTerm = old, oldTerm
	r.f.From, r.f.FaultTerm, r.f.OldTerm = old.id, oldTerm, oldTerm
	r.step("%s leads term %d; pods change under it", old.id, oldTerm)
	if abort := r.worldChanged(e.changePods()); abort != "" {
		return abort
	}
	want := e.world.newest()
	r.f.Checks = append(r.f.Checks, check("live change published",
		e.waitFor(func() bool {
			p, err := e.published()
			return err == nil && holdsNewest(old, want) && p.Term == oldTerm && p.PodGeneration == podGeneration(old)
		}), "the leader did not publish the pods change of its own term"))
	e.sleep(o.Dwell)
	return ""
}

// changeBeforeFault changes the configuration (to an invalid document
// when the failover is the one) and the pods just before the fault, and
// waits until every replica took the changes.
func (r *failoverRun) changeBeforeFault() string {
	e := r.e
	if abort := r.worldChanged(e.changeConfig(!r.f.InvalidConfig)); abort != "" {
		return abort
	}
	if abort := r.worldChanged(e.changePods()); abort != "" {
		return abort
	}
	if !e.synced(e.liveNodes(nil)) {
		r.fail("replicas synced", "the all-replica side did not take the changes within %v", e.opts.StepTimeout)
	}
	return ""
}

// fault fails the leader.
func (r *failoverRun) fault() string {
	e, o, f, old := r.e, r.e.opts, &r.f, r.old
	r.step("%s %s (term %d)", f.Fault, old.id, r.oldTerm)
	f.FaultAt = time.Now()
	switch f.Fault {
	case FaultKill:
		e.rec.mark(Mark{At: f.FaultAt, Kind: MarkKill, Replica: old.id, Term: r.oldTerm, Text: "killed"})
		e.view.logf("failover %d: killing %s (term %d): its stores fail from now on; the lease is left held, and the kubelet stays silent (as when its node is cut off)", f.N, old.id, r.oldTerm)
		old.kill()
	case FaultPause:
		e.rec.mark(Mark{At: f.FaultAt, Kind: MarkPause, Replica: old.id, Term: r.oldTerm, Text: "paused"})
		e.view.logf("failover %d: pausing %s (term %d) for %v: its store calls hang", f.N, old.id, r.oldTerm, o.LeaseDuration+o.RenewDeadline)
		old.gate.pause()
	case FaultCrash:
		e.view.logf("failover %d: crashing %s (term %d): its stores fail from now on; the lease is left held, and the kubelet reports once the process is over (this demo's kubelet reports at once; a real one reports at its next pod status sync, about a second or more later, and the takeover waits for that report)", f.N, old.id, r.oldTerm)
		old.kill()
		// kill returned once the replica's Run did: its elector and
		// components are over, as a process is when its kubelet sees the
		// container exit.
		f.ReportAt = e.kubelet.terminated(old.pod, 137)
		e.rec.mark(Mark{At: f.FaultAt, Kind: MarkCrash, Replica: old.id, Term: r.oldTerm,
			Text: fmt.Sprintf("crashed; the kubelet reported its container terminated %v later", round(f.ReportAt.Sub(f.FaultAt)))})
		e.rec.mark(Mark{At: f.ReportAt, Kind: MarkReport, Replica: old.id, Term: r.oldTerm,
			Text: "the kubelet reported the container terminated (this demo's kubelet at once)"})
		e.view.logf("failover %d: kubelet: %s's container terminated (incarnation %s…), %v after the crash", f.N, old.id, old.pod.Nonce[:8], round(f.ReportAt.Sub(f.FaultAt)))
	case FaultRelease:
		e.rec.mark(Mark{At: f.FaultAt, Kind: MarkRelease, Replica: old.id, Term: r.oldTerm, Text: "released"})
		e.view.logf("failover %d: stopping %s (term %d) gracefully: it releases the lease", f.N, old.id, r.oldTerm)
		old.release()
		e.kubelet.terminated(old.pod, 0) // the lease is released: the report changes nothing
	case FaultHang:
		return r.hang()
	}
	return ""
}

// changeWhileLeaderless changes the world again while nobody leads (after
// a kill or a pause): the next leader can only learn it through its own
// all-replica side and the replays.
func (r *failoverRun) changeWhileLeaderless() string {
	e := r.e
	if r.f.Fault == FaultKill || r.f.Fault == FaultPause {
		if !r.f.InvalidConfig {
			if abort := r.worldChanged(e.changeConfig(true)); abort != "" {
				return abort
			}
		}
		if abort := r.worldChanged(e.changePods()); abort != "" {
			return abort
		}
		if !e.synced(e.liveNodes(r.old)) {
			r.fail("replicas synced", "the all-replica side did not take the changes made while nobody led within %v", e.opts.StepTimeout)
		}
	}
	r.want = e.world.newest()
	return ""
}

// newLeader waits for the new leader and its first render and publish, and
// checks the hand-over.
func (r *failoverRun) newLeader() string {
	e, f, want := r.e, &r.f, r.want
	r.step("%s %s; waiting for a new leader", f.Fault, r.old.id)
	nl, newTerm, ok := e.waitLeader(r.oldTerm)
	if !ok {
		r.fail("new leader elected", "no single ready leader above term %d within %v", r.oldTerm, e.opts.StepTimeout)
		if f.Fault == FaultPause {
			r.old.gate.resume()
		}
		return "no new leader"
	}
	f.To, f.NewTerm = nl.id, newTerm
	f.ConfigVersion, f.PodGeneration = want.ConfigVersion, podGeneration(nl)
	r.step("%s leads term %d; checking", nl.id, newTerm)
	// The term-ready report, the first render, and the object published
	// from it (a term may first publish only a status, before its first
	// render). Why wait for the report: the runtime's Status says the term
	// is ready a moment before its OnTermReady hook has reported it.
	e.waitFor(func() bool {
		t, ok := e.rec.term(newTerm, e.incarnations())
		p, err := e.published()
		return ok && !t.Ready.IsZero() && t.FirstRender != nil && err == nil && p.Term == newTerm &&
			p.ConfigVersion == want.ConfigVersion && p.PodGeneration == f.PodGeneration
	})
	f.Checks = append(f.Checks, e.checkNewLeader(f, r.old, nl, want)...)
	return ""
}

// recover resumes a paused leader and checks it stepped down, or starts a
// killed, crashed or released one again (a new incarnation of its pod's
// container) and checks it synced.
func (r *failoverRun) recover() string {
	e, o, f, old := r.e, r.e.opts, &r.f, r.old
	if f.Fault == FaultHang {
		r.recoverHang()
		return ""
	}
	if f.Fault == FaultPause {
		e.sleep(time.Until(f.FaultAt.Add(o.LeaseDuration + o.RenewDeadline)))
		e.rec.mark(Mark{At: time.Now(), Kind: MarkResume, Replica: old.id, Term: r.oldTerm, Text: "resumed"})
		e.view.logf("failover %d: resuming %s; it must find its term %d over", f.N, old.id, r.oldTerm)
		old.gate.resume()
		f.Checks = append(f.Checks, e.checkResumed(old, r.oldTerm, f.NewTerm)...)
		return ""
	}
	n, err := e.startNode(old.id, old.inc.n+1)
	if err != nil {
		r.fail("restart", "%v", err)
		return err.Error()
	}
	e.replace(old, n)
	e.rec.mark(Mark{At: time.Now(), Kind: MarkRestart, Replica: n.id, Text: "restarted"})
	e.view.logf("failover %d: restarted %s as a fresh follower", f.N, n.id)
	f.Checks = append(f.Checks, check("restarted replica synced", e.synced([]*node{n}),
		"%s did not sync within %v", n.id, o.StepTimeout))
	return ""
}

// podGeneration is the generation of the pod set n's discovery holds.
func podGeneration(n *node) uint64 {
	cur, _ := n.r.Discovery().Current()
	if cur == nil {
		return 0
	}
	return cur.Generation
}
