package demo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/leaderelection"
)

func check(name string, ok bool, format string, args ...any) Check {
	c := Check{Name: name, OK: ok}
	if !ok {
		c.Detail = fmt.Sprintf(format, args...)
	}
	return c
}

// handover is the check of one hand-over from old to nl, as it collects its
// checks.
type handover struct {
	e       *engine
	f       *Failover
	old, nl *node
	want    newest
	ot, nt  TermRecord // the old and the new term
	checks  []Check
}

func (h *handover) add(name string, ok bool, format string, args ...any) {
	h.checks = append(h.checks, check(name, ok, format, args...))
}

// newestChecks name the checks Failover.Newest sums up.
var newestChecks = []string{"leader-only state newest", "first render newest", "published by the new term", "leader's discovery newest"}

// checkNewLeader checks the hand-over from old to nl.
func (e *engine) checkNewLeader(f *Failover, old, nl *node, want newest) []Check {
	incs := e.incarnations()
	h := &handover{e: e, f: f, old: old, nl: nl, want: want}
	h.ot, _ = e.rec.term(f.OldTerm, incs)
	h.nt, _ = e.rec.term(f.NewTerm, incs)
	h.terms()
	h.leaderOnlyState()
	h.firstRender()
	h.published()
	h.fenced()
	h.takeover()
	h.deathSignal()
	f.Newest = true
	for _, c := range h.checks {
		if !c.OK && slices.Contains(newestChecks, c.Name) {
			f.Newest = false
		}
	}
	return h.checks
}

// terms checks the order of the two terms and that the new one became
// ready, and measures the hand-over.
func (h *handover) terms() {
	f, ot, nt := h.f, h.ot, h.nt
	h.add("term increased", f.NewTerm > f.OldTerm, "new term %d is not above %d", f.NewTerm, f.OldTerm)
	h.add("no overlap with the old term", !ot.End.IsZero() && !ot.End.After(nt.Sent),
		"old term %d ended %s, new term %d's acquisition was sent %s", f.OldTerm, h.e.at(ot.End), f.NewTerm, h.e.at(nt.Sent))
	f.Handover = nt.Sent.Sub(f.FaultAt)
	if !ot.End.IsZero() {
		f.Gap = nt.Sent.Sub(ot.End)
	}
	h.add("term ready", !nt.Ready.IsZero(), "term %d never became ready", f.NewTerm)
	f.TermReady = nt.ReadyLatency
}

// leaderOnlyState checks what the new leader's components hold.
func (h *handover) leaderOnlyState() {
	f, nl, want, gen := h.f, h.nl, h.want, h.f.PodGeneration
	cur, _ := nl.r.Discovery().Current()
	h.add("leader's discovery newest", cur != nil && slices.Equal(cur.Pods, want.Pods), "%s's discovery does not hold the newest pods", nl.id)
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
	h.add("leader-only state newest", len(stale) == 0, "want config %s pods g%d: %s", short(want.ConfigVersion), gen, strings.Join(stale, "; "))
}

// firstRender checks the new term's first render: rendered from the newest
// state, a server for each ready pod and none for the others.
func (h *handover) firstRender() {
	f, nt, want, gen := h.f, h.nt, h.want, h.f.PodGeneration
	r := nt.FirstRender
	if r == nil {
		h.add("first render newest", false, "no render in term %d", f.NewTerm)
		return
	}
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
	h.add("first render newest", len(bad) == 0, "want %s/g%d with %s: %s", short(want.ConfigVersion), gen, count(len(ready), "server"), strings.Join(bad, "; "))
}

// published checks the published object: the new term's, of the newest
// state, with its render, and the refusal when the newest document was
// invalid.
func (h *handover) published() {
	f, want, gen := h.f, h.want, h.f.PodGeneration
	p, err := h.e.published()
	if err != nil {
		h.add("published by the new term", false, "%v", err)
		return
	}
	var bad []string
	if p.Term != f.NewTerm || p.PublishedBy != h.nl.id {
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
	h.add("published by the new term", len(bad) == 0, "%s", strings.Join(bad, "; "))
}

// fenced checks that a write with the old term is refused and changes
// nothing.
func (h *handover) fenced() {
	f, obj := h.f, h.e.world.e.Published
	before, _ := obj.Get(context.Background())
	_, err := configpublisher.Write(context.Background(), obj, configpublisher.Record{
		Term: f.OldTerm, Identity: h.old.id, Status: configpublisher.StatusValid,
		Content: &configpublisher.Payload{Data: map[string]string{"stale": "a write from the old term"}, ConfigVersion: "stale"},
	})
	after, _ := obj.Get(context.Background())
	f.Fenced = errors.Is(err, configpublisher.ErrStaleTerm) && after.ResourceVersion == before.ResourceVersion
	h.add("old term fenced", f.Fenced, "a write with term %d returned %v (object %s -> %s)", f.OldTerm, err, before.ResourceVersion, after.ResourceVersion)
}

// takeover checks the kind of takeover: of an expired lease after a kill
// or a pause, of a held one after a crash (its holder proven dead), of a
// released one after a release or a hang.
func (h *handover) takeover() {
	wantFrom, kind := h.old.id, "expired lease"
	switch h.f.Fault {
	case FaultRelease, FaultHang:
		wantFrom, kind = "", "released lease" // released, or resigned: the resignation releases
	case FaultCrash:
		kind = "lease of a holder proven dead"
	}
	h.add("takeover as expected", h.nt.TakeoverKnown && h.nt.TakeoverFrom == wantFrom,
		"the acquiring write saw holder %q, want %q (%s)", h.nt.TakeoverFrom, wantFrom, kind)
}

// deathSignal checks, after a crash or a kill, what ended the wait for the
// lease. The lease rules let a follower take it a lease duration after it
// saw the old leader's last renew, which was sent before it was seen: a
// takeover sent less than a lease duration after that renew was sent was
// not allowed by them. After a kill (the kubelet silent) the takeover must
// have waited the lease out; after a crash it must have come on the
// kubelet's report, before the lease expired, at once after the report and
// not before it.
func (h *handover) deathSignal() {
	f, lease := h.f, h.e.opts.LeaseDuration
	if f.Fault != FaultKill && f.Fault != FaultCrash {
		return
	}
	lastRenew := h.e.rec.lastWrite(h.old.inc)
	if lastRenew.IsZero() {
		h.add("old leader's last renew known", false, "no write of %s's term %d recorded", h.old.id, f.OldTerm)
		return
	}
	f.SinceRenew = h.nt.Sent.Sub(lastRenew)
	if f.Fault == FaultKill {
		h.add("kubelet silent: lease waited out", f.SinceRenew >= lease,
			"term %d's acquisition was sent %v after %s's last renew, before its lease of %v expired", f.NewTerm, f.SinceRenew, h.old.id, lease)
		return
	}
	h.add("crash taken over before the lease expired", f.SinceRenew < lease,
		"term %d's acquisition was sent %v after %s's last renew: the lease of %v was waited out, the kubelet's report not used", f.NewTerm, f.SinceRenew, h.old.id, lease)
	f.SinceReport = h.nt.Acquired.Sub(f.ReportAt)
	h.add("term started at once after the kubelet's report", !h.nt.Acquired.IsZero() && !h.nt.Sent.Before(f.ReportAt) && f.SinceReport <= lease/4,
		"the kubelet reported at %s; term %d's acquisition was sent at %s and it started at %s: want neither before the report nor more than %v after it",
		h.e.at(f.ReportAt), f.NewTerm, h.e.at(h.nt.Sent), h.e.at(h.nt.Acquired), lease/4)
}

// checkResumed checks a paused leader after it resumed.
func (e *engine) checkResumed(old *node, oldTerm, newTerm uint64) []Check {
	stepped := e.waitFor(func() bool {
		t, _ := e.rec.term(oldTerm, e.incarnations())
		return t.LostReason != "" && !old.r.Manager().Status().Leading && !old.r.Elector().Elector().IsLeader()
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
