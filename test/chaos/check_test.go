package chaos

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// Violation kinds.
const (
	vOverlap      = "two leaders"
	vTermOrder    = "term not above an earlier term"
	vRegister     = "fenced register history not linearizable under term fencing"
	vOwnLease     = "stepped down from a lease it still held"
	vNoLeader     = "no single leader after the faults stopped"
	vWedged       = "candidate does not see the leader"
	vUnstable     = "leadership changed after it settled"
	vFinalRefused = "the settled leader's fenced writes refused"
	vUnexpected   = "unexpected error"
	vOvertaken    = "term started on a write the watch had shown overtaken"
)

// violation is one property a history broke.
type violation struct {
	kind   string
	text   string
	defect string // the issue 9 defect whose pattern it shows, "" if none is known
}

// result is the checker's verdict on one history, with its figures.
type result struct {
	violations []violation
	notes      []string // findings that are not violations (explained in doc.go)
	terms      int
	writes     int
	refused    int
	late       int           // writes accepted from a term that had ended by then
	recovery   time.Duration // heal to the settled leader's term start, 0 if it held through
	unknown    bool          // the lease was deleted or restored: the longer bound applies
	windows    int           // overlaps inside the documented cold-start window (notes)
	window     time.Duration // the longest of them
	minGap     time.Duration // smallest gap between terms of different incarnations, -1 if none
	// The kubelet model's figures (kubelet_test.go).
	proofs         int           // proofs of death delivered to death watches
	deathTakeovers int           // takeovers earlier than the lease rules allow
	finalCrashes   int           // final crashes played (0 or 1)
	finalDelay     time.Duration // the final crash's report to the next term
}

func (r *result) fail(kind, format string, args ...any) {
	r.failDefect(kind, "", format, args...)
}

func (r *result) failDefect(kind, defect, format string, args ...any) {
	r.violations = append(r.violations, violation{kind: kind, text: fmt.Sprintf(format, args...), defect: defect})
}

// check judges a history.
func check(h *history) *result {
	res := &result{minGap: -1, unknown: h.count.get(fLeaseDeleted)+h.count.get(fRestore) > 0}
	terms := h.snapshotTerms()
	ops := h.reg.snapshot()
	res.terms, res.writes = len(terms), len(ops)
	h.mu.Lock()
	faults := slices.Clone(h.faults)
	probes := slices.Clone(h.probes)
	started := slices.Clone(h.started)
	errs := slices.Clone(h.errs)
	h.mu.Unlock()
	for _, e := range errs {
		res.fail(vUnexpected, "%s", e)
	}
	checkOvertaken(h, started, faults, res)
	checkOverlaps(h, terms, faults, res)
	checkTermOrder(h, terms, faults, res)
	checkOwnLease(h, terms, faults, res)
	checkRegister(h, terms, ops, faults, res)
	checkSettled(h, terms, ops, probes, faults, res)
	checkKubelet(h, terms, faults, res)
	return res
}

// checkOvertaken: an elector starts a term only on a write its watch has not shown
// overtaken, that is, unless by the time the write was answered an event of a later
// state (a higher resourceVersion) had been handed to the watch: it was in the channel
// the elector reads, so the elector could know the lease had moved past its write. It
// counts terms that ended before their leader work began too. Across a restore an
// older state can come with a higher version: a note.
func checkOvertaken(h *history, started []startedTerm, faults []logEntry, res *result) {
	for _, s := range started {
		if !s.known || s.write.delivered <= s.term {
			continue
		}
		msg := fmt.Sprintf("%s started term %d on the answer at %s to its write sent at %s, when its watch had already been handed version %d",
			s.who, s.term, h.rel(s.write.answered), h.rel(s.write.sent), s.write.delivered)
		if restoredBetween(faults, h.begin, s.write.answered) {
			res.notes = append(res.notes, msg+" (after a restore)")
			continue
		}
		res.fail(vOvertaken, "%s", msg)
	}
}

// coldStart reports whether t's incarnation had seen no lease and no holder before it
// sent the write that acquired t (the term start, if that write is unknown).
func coldStart(t termRec) bool {
	decided := t.start
	if !t.sent.IsZero() {
		decided = t.sent
	}
	return t.firstSaw.IsZero() || !t.firstSaw.Before(decided)
}

// coldOver reports whether lo, begun after hi, is below hi only as the cold-start window
// seen from the other side: hi, a cold start, created the lease under the higher term,
// and lo's write, applied before (its version is lower) and then deleted, was answered
// late (lo's belief began after hi's). Fencing covers it as it covers the window: hi's
// term is the higher. (A lo whose watch had shown the lease moved past its write
// before the answer is failed by checkOvertaken.)
func coldOver(hi, lo termRec) bool { return hi.term > lo.term && coldStart(hi) }

// endOf is the end of a term's belief; a term still running counts as running forever.
func endOf(t termRec) time.Time {
	if t.ended() {
		return t.end
	}
	return time.Unix(1<<40, 0)
}

// checkOverlaps: no two incarnations inside overlapping terms. Intervals are closed at
// the start and open at the end: a term that ends at the instant another starts does
// not overlap it. One overlap is allowed, counted and noted: a candidate that had never
// seen the lease (a cold start, to it) creates a lease that was deleted while its
// holder was cut off, under a higher term (issue 9 defect 2, the fenced window), and
// later terms of that candidate inside the same old term (it may re-create a lease it
// held itself at once). With exact (fake time) recording both ends are the instants the
// candidates' beliefs changed; with sampled recording the intervals are the parts
// known for certain, so an overlap is never a scheduling artefact.
func checkOverlaps(h *history, terms []termRec, faults []logEntry, res *result) {
	slices.SortStableFunc(terms, func(a, b termRec) int { return a.start.Compare(b.start) })
	for i, a := range terms {
		windowed := false // an earlier term of b's incarnation opened the cold-start window over a
		for _, b := range terms[i+1:] {
			if a.who == b.who {
				continue
			}
			gap := b.start.Sub(endOf(a))
			if gap >= 0 {
				if res.minGap < 0 || gap < res.minGap {
					res.minGap = gap
				}
				continue
			}
			hint, defect := overlapHint(h, a, b, faults)
			if coldOver(a, b) {
				res.windows++
				res.window = max(res.window, earliest(endOf(a), endOf(b)).Sub(b.start))
				res.notes = append(res.notes, fmt.Sprintf("fenced window: %s term %d (lower, answered late) began %v inside %s term %d (cold start)%s",
					b.who, b.term, earliest(endOf(a), endOf(b)).Sub(b.start), a.who, a.term, hint))
				continue
			}
			if (coldStart(b) || windowed) && b.term > a.term {
				windowed = true
				// The window the elector documents: a candidate that never saw the lease
				// cannot tell a deleted one from none and creates it at once. Fencing makes
				// it harmless (the register refuses a's term once b's wrote, which the
				// register check verifies); count it and its length.
				res.windows++
				res.window = max(res.window, earliest(endOf(a), endOf(b)).Sub(b.start))
				res.notes = append(res.notes, fmt.Sprintf("fenced window: %s term %d (cold start, or after one) started %v inside %s term %d%s",
					b.who, b.term, earliest(endOf(a), endOf(b)).Sub(b.start), a.who, a.term, hint))
				continue
			}
			res.failDefect(vOverlap, defect, "%s term %d [%s, %s) overlaps %s term %d [%s, %s) by %v%s",
				a.who, a.term, h.rel(a.start), h.rel(a.end), b.who, b.term, h.rel(b.start), h.rel(b.end),
				earliest(endOf(a), endOf(b)).Sub(b.start), hint)
		}
	}
}

// earliest returns the earlier of two times.
func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// overlapHint names the defect pattern of an overlap of a by b, from the faults
// between their starts (restores from two lease durations before a's): a lease
// re-created by a candidate that had seen it (defect 1) or never had (defect 2), or a
// restore (defect 4).
func overlapHint(h *history, a, b termRec, faults []logEntry) (string, string) {
	var hints []string
	defect := ""
	for _, f := range faults {
		if f.at.After(b.start) {
			continue
		}
		// A restore also matters before a's term: a candidate that missed it may
		// compare-and-swap with a version from before it, which a later write reuses.
		if f.at.Before(a.start) && (f.kind != fRestore || f.at.Before(a.start.Add(-2*h.cfg.LeaseDuration))) {
			continue
		}
		switch f.kind {
		case fLeaseDeleted:
			if coldStart(b) {
				hints = append(hints, fmt.Sprintf("lease deleted at %s; %s never saw the lease before it took it (issue 9 defect 2)", h.rel(f.at), b.who))
				defect = "2"
			} else {
				hints = append(hints, fmt.Sprintf("lease deleted at %s; %s had seen the lease (at %s) (issue 9 defect 1)", h.rel(f.at), b.who, h.rel(b.firstSaw)))
				defect = "1"
			}
		case fRestore:
			hints = append(hints, fmt.Sprintf("snapshot restored at %s (issue 9 defect 4)", h.rel(f.at)))
			if defect == "" {
				defect = "4"
			}
		}
	}
	if len(hints) == 0 {
		return "", ""
	}
	return ": " + strings.Join(hints, "; "), defect
}

// restoredBetween reports whether a snapshot restore happened in [from, to].
// writtenFrom is the earliest instant t's term number may have been handed out: the
// send of its acquiring write if known, its start otherwise.
func writtenFrom(t termRec) time.Time {
	if !t.sent.IsZero() && t.sent.Before(t.start) {
		return t.sent
	}
	return t.start
}

func restoredBetween(faults []logEntry, from, to time.Time) bool {
	for _, f := range faults {
		if f.kind == fRestore && !f.at.Before(from) && !f.at.After(to) {
			return true
		}
	}
	return false
}

// checkTermOrder: terms are fencing tokens, so each term is above every term that
// started before it. Across a restore of an older snapshot the store itself reuses
// versions; that is recorded as a note, not a violation (see doc.go). A term's number
// is fixed when its acquiring write lands, between its send and its answer, so a
// restore after the send of the earlier term's write (also one before its answer)
// counts.
func checkTermOrder(h *history, terms []termRec, faults []logEntry, res *result) {
	slices.SortStableFunc(terms, func(a, b termRec) int { return a.start.Compare(b.start) })
	for i, b := range terms {
		note := ""
		for _, a := range terms[:i] {
			if b.term > a.term || (b.term == a.term && b.who == a.who) {
				continue
			}
			msg := fmt.Sprintf("%s term %d at %s is not above %s term %d at %s",
				b.who, b.term, h.rel(b.start), a.who, a.term, h.rel(a.start))
			switch {
			case restoredBetween(faults, writtenFrom(a), b.start):
				note = msg + " (a restore moved versions back in between)"
			case coldOver(a, b):
				note = msg + " (a cold start's term, above a write answered late)"
			default:
				res.fail(vTermOrder, "%s", msg)
				note = ""
			}
			if note == "" {
				break
			}
		}
		if note != "" {
			res.notes = append(res.notes, note)
		}
	}
}

// checkOwnLease: a leader never gives up, as lost, a lease whose current state is its
// own write (issue 9 defect 3: a lost renew reply then a conflicting retry). After a
// restore a version can name two states (one from before it, still on its way in a
// held watch, and a new one), so a step-down then is a note.
func checkOwnLease(h *history, terms []termRec, faults []logEntry, res *result) {
	for _, t := range terms {
		if t.ownLeaseAtEnd && restoredBetween(faults, t.end.Add(-2*h.cfg.LeaseDuration), t.end) {
			res.notes = append(res.notes, fmt.Sprintf("%s term %d stepped down from its own write after a restore reused versions (%s)",
				t.who, t.term, t.ownLeaseState))
			continue
		}
		if t.ownLeaseAtEnd {
			res.failDefect(vOwnLease, "3", "%s term %d ended at %s as lost, but the lease still held its own write (%s)",
				t.who, t.term, h.rel(t.end), t.ownLeaseState)
		}
	}
}

// regIn and regOut are the input and output of a fenced write for porcupine.
type regIn struct {
	who  string
	term uint64
}

type regState struct {
	max   uint64
	owner string
}

// fencedModel is the register leaders write to, as fencing must make it behave: a
// write is accepted when its term is above every term written before, or equal to it
// from the same incarnation (one term, one leader), and refused otherwise.
var fencedModel = porcupine.Model{
	Init: func() any { return regState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, accepted := state.(regState), input.(regIn), output.(bool)
		ok := in.term > s.max || (in.term == s.max && in.who == s.owner)
		if ok != accepted {
			return false, s
		}
		if ok {
			return true, regState{max: in.term, owner: in.who}
		}
		return true, s
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regIn)
		return fmt.Sprintf("write(%s, term %d) -> %v", in.who, in.term, output)
	},
}

// checkRegister checks the fenced writes with porcupine against fencedModel, and counts
// writes accepted after their term had ended (a paused leader's late write that
// fencing let through because no newer term had written yet: harmless by the model).
func checkRegister(h *history, terms []termRec, ops []regOp, faults []logEntry, res *result) {
	pops := make([]porcupine.Operation, len(ops))
	for i, o := range ops {
		pops[i] = porcupine.Operation{
			ClientId: o.cand, Input: regIn{who: o.who, term: o.term}, Output: o.accepted,
			Call: o.call.Sub(h.begin).Nanoseconds(), Return: o.ret.Sub(h.begin).Nanoseconds(),
		}
		if !o.accepted {
			res.refused++
		}
	}
	if !porcupine.CheckOperations(fencedModel, pops) {
		msg := "fenced writes:\n" + describeOps(h, ops)
		if restoredBetween(faults, h.begin, h.checkAt) {
			res.notes = append(res.notes, vRegister+" after a restore reused versions as terms")
		} else {
			res.fail(vRegister, "%s", msg)
		}
	}
	for _, o := range ops {
		for _, t := range terms {
			if t.who == o.who && t.term == o.term && t.ended() && o.accepted && o.call.After(t.end) {
				res.late++
			}
		}
	}
}

func describeOps(h *history, ops []regOp) string {
	var b strings.Builder
	for _, o := range ops {
		fmt.Fprintf(&b, "  [%s, %s] %s term %d accepted %v\n", h.rel(o.call), h.rel(o.ret), o.who, o.term, o.accepted)
	}
	return b.String()
}

// checkSettled: by healAt + bound exactly one candidate leads, every live candidate
// sees it, it still leads the same term a LeaseDuration later, no term started in
// between, and its fenced writes in that time were accepted.
func checkSettled(h *history, terms []termRec, ops []regOp, probes []probe, faults []logEntry, res *result) {
	if len(probes) != 2 {
		res.fail(vUnexpected, "%d probes recorded, want 2", len(probes))
		return
	}
	first, last := probes[0], probes[1]
	defect := ""
	if restoredBetween(faults, h.begin, h.checkAt) {
		defect = "4"
	}
	if len(first.leaders) != 1 {
		res.failDefect(vNoLeader, defect, "at %s (faults over at %s, bound %v) leaders %v, views %v, down %v",
			h.rel(first.at), h.rel(h.healAt), h.bound, first.leaders, first.views, first.down)
		return
	}
	leader := first.leaders[0]
	id, _, _ := strings.Cut(leader, "#")
	for cand, view := range first.views {
		if view != id {
			res.failDefect(vWedged, defect, "at %s %s sees leader %q, the leader is %s", h.rel(first.at), cand, view, leader)
		}
	}
	if len(last.leaders) != 1 || last.leaders[0] != leader || last.terms[leader] != first.terms[leader] {
		res.fail(vUnstable, "at %s leaders %v terms %v; at %s leaders %v terms %v",
			h.rel(first.at), first.leaders, first.terms, h.rel(last.at), last.leaders, last.terms)
	}
	for _, t := range terms {
		// From last.at on all stop, and a release may be taken: at that very instant
		// too, after the probe saw the settled leader (a bubble's instant holds both).
		if t.start.After(first.at) && t.start.Before(last.at) {
			res.fail(vUnstable, "%s term %d started at %s, after the leadership settled", t.who, t.term, h.rel(t.start))
		}
		if t.who == leader && t.term == first.terms[leader] {
			res.recovery = max(0, t.start.Sub(h.healAt))
		}
	}
	refused := 0
	for _, o := range ops {
		if o.who == leader && o.call.After(first.at) && !o.accepted {
			refused++
		}
	}
	if refused > 0 {
		msg := fmt.Sprintf("%s term %d: %d writes refused after %s", leader, first.terms[leader], refused, h.rel(first.at))
		if restoredBetween(faults, h.begin, h.checkAt) {
			res.notes = append(res.notes, msg+" (terms fell below an older term after a restore)")
		} else {
			res.fail(vFinalRefused, "%s", msg)
		}
	}
}

// causeName is a short name of the cause a term ended with.
func causeName(err error) string {
	switch {
	case err == nil:
		return "-"
	case errors.Is(err, leaderelection.ErrLeaseLost):
		return "lost"
	case errors.Is(err, leaderelection.ErrRenewDeadlineMissed):
		return "deadline"
	default:
		return err.Error()
	}
}

// report is the failure message of a history: what broke, how to replay it, and the
// history itself.
func report(h *history, res *result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d violations\n", h.seed, len(res.violations))
	for _, v := range res.violations {
		d := ""
		if v.defect != "" {
			d = " [issue 9 defect " + v.defect + " pattern]"
		}
		fmt.Fprintf(&b, "  VIOLATION %s%s: %s\n", v.kind, d, v.text)
	}
	for _, n := range res.notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	env := ""
	if h.exact { // in-memory: the skew knobs apply
		env = h.skew.env()
	}
	if h.count.get(fRealAPIRestart) > 0 {
		env += envAPIRestarts + "=1 "
	}
	fmt.Fprintf(&b, "replay: %sBATON_CHAOS_SEED=%d go test -race -run '%s$' -v ./test/chaos\n", env, h.seed, h.test)
	fmt.Fprintf(&b, "config: %d candidates, lease %v renew %v retry %v; faults over at %s, one leader due by %s\n",
		h.n, h.cfg.LeaseDuration, h.cfg.RenewDeadline, h.cfg.RetryPeriod, h.rel(h.healAt), h.rel(h.checkAt))
	b.WriteString("schedule:\n")
	for _, l := range h.sched {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	b.WriteString("faults injected:\n")
	h.mu.Lock()
	for _, f := range h.faults {
		fmt.Fprintf(&b, "  %s %s\n", h.rel(f.at), f.text)
	}
	h.mu.Unlock()
	b.WriteString("terms (start, end, cause):\n")
	for _, t := range h.snapshotTerms() {
		fmt.Fprintf(&b, "  %s term %d [%s, %s) %s\n", t.who, t.term, h.rel(t.start), h.rel(t.end), causeName(t.cause))
	}
	logs := strings.Split(h.logs.String(), "\n")
	if len(logs) > 400 {
		logs = logs[len(logs)-400:]
	}
	b.WriteString("elector logs (last 400 lines):\n")
	b.WriteString(strings.Join(logs, "\n"))
	return b.String()
}
