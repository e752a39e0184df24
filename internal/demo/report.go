package demo

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Check is one verified property.
type Check struct {
	Name string
	OK   bool
	// Detail says what was found instead, for a failed check.
	Detail string
}

// Failover is one leader failure and what was checked of it.
type Failover struct {
	N     int
	Fault Fault
	// InvalidConfig is true when the newest document before the fault was
	// an invalid one.
	InvalidConfig bool
	From          string
	// FaultTerm is the term the fault hit. OldTerm is the term handed over
	// from: the same, but for a hang, where it is the later term the stuck
	// replica led again without its component, and resigned.
	FaultTerm uint64
	OldTerm   uint64
	To        string
	NewTerm   uint64
	FaultAt   time.Time
	// Handover runs from the fault to the sending of the new leader's
	// acquiring write; Gap from the end of the old term to it.
	Handover, Gap time.Duration
	// After a crash, ReportAt is when the kubelet reported the old leader's
	// container terminated (once its process was over), and SinceReport
	// runs from then to the new term's start (its BecameLeaderEvent).
	ReportAt    time.Time
	SinceReport time.Duration
	// After a kill or a crash, SinceRenew runs from the sending of the old
	// leader's last renew to the sending of the new leader's acquiring
	// write: the lease rules allow the takeover once it reaches the lease
	// duration, the kubelet's report before.
	SinceRenew time.Duration
	// TermReady runs from the lease's acquisition to the term being ready
	// (the runtime's measure); FirstRender to the term's first render.
	TermReady, FirstRender time.Duration
	// ConfigVersion and PodGeneration are the newest state the new leader
	// had to hold (the generation is the shared pod set's version, the same
	// on every replica).
	ConfigVersion string
	PodGeneration uint64
	// Newest and Fenced sum up the state and fencing checks.
	Newest, Fenced bool
	Checks         []Check
	// Interrupted is true when the run's context ended during the
	// failover; its checks are then left out (they failed for want of
	// time, not for a fault of the replicas).
	Interrupted bool
}

// OK reports whether every check of the failover passed.
func (f Failover) OK() bool {
	for _, c := range f.Checks {
		if !c.OK {
			return false
		}
	}
	return len(f.Checks) > 0
}

func (f Failover) passed() (n int) {
	for _, c := range f.Checks {
		if c.OK {
			n++
		}
	}
	return n
}

// line is the one-line account printed after the failover.
func (f Failover) line(total int) string {
	if f.Interrupted {
		return fmt.Sprintf("failover %d/%d (%s %s, %s): interrupted", f.N, total, f.Fault, dash(f.From), f.terms())
	}
	if f.To == "" {
		return fmt.Sprintf("failover %d/%d (%s %s, %s): FAILED: %s", f.N, total, f.Fault, f.From, f.terms(), failedChecks(f.Checks))
	}
	newest := "newest"
	if !f.Newest {
		newest = "NOT the newest"
	}
	if f.InvalidConfig {
		newest += " (last valid config kept, invalid one reported)"
	}
	s := fmt.Sprintf("failover %d/%d: %s %s (%s) -> %s leads term %d: lease acquired %v after the fault, term ready %v after that, first render after %v; state %s: config %s, pods g%d; term %d > %d; no overlap; old term fenced: %v; %d/%d checks passed",
		f.N, total, f.Fault, f.From, f.terms(), f.To, f.NewTerm, round(f.Handover), f.TermReady, round(f.FirstRender),
		newest, short(f.ConfigVersion), f.PodGeneration, f.NewTerm, f.OldTerm, f.Fenced, f.passed(), len(f.Checks))
	s += f.deathNote()
	if !f.OK() {
		s += "; FAILED: " + failedChecks(f.Checks)
	}
	return s
}

// deathNote says, after a crash or a kill, what ended the wait for the
// lease: the kubelet's report, or the lease running out.
func (f Failover) deathNote() string {
	switch f.Fault {
	case FaultCrash:
		return fmt.Sprintf("; death signal: the kubelet reported the container terminated %v after the crash, and term %d started %s after the report (its acquisition sent %v after the old leader's last renew)",
			round(f.ReportAt.Sub(f.FaultAt)), f.NewTerm, ms(f.SinceReport), round(f.SinceRenew))
	case FaultKill:
		return fmt.Sprintf("; kubelet silent: the lease was taken %v after the old leader's last renew", round(f.SinceRenew))
	}
	return ""
}

// ms says d in milliseconds, to the tenth.
func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

// terms names the term the fault hit and, after a hang, the term handed
// over from.
func (f Failover) terms() string {
	if f.OldTerm != f.FaultTerm && f.OldTerm != 0 {
		return fmt.Sprintf("term %d, stuck in term %d", f.FaultTerm, f.OldTerm)
	}
	return fmt.Sprintf("term %d", f.FaultTerm)
}

// termColumn is the table's FROM TERM: the term the fault hit, and after a
// hang the term handed over from.
func (f Failover) termColumn() string {
	if f.OldTerm != f.FaultTerm && f.OldTerm != 0 {
		return fmt.Sprintf("%d→%d", f.FaultTerm, f.OldTerm)
	}
	return fmt.Sprint(f.FaultTerm)
}

func failedChecks(cs []Check) string {
	var out []string
	for _, c := range cs {
		if !c.OK {
			out = append(out, c.Name+": "+c.Detail)
		}
	}
	return strings.Join(out, "; ")
}

// Report is the outcome of a run.
type Report struct {
	// Options are the options run with, defaults applied (without the
	// writers and the logger).
	Options   Options
	Replicas  []string
	Started   time.Time
	Duration  time.Duration
	Failovers []Failover
	// Global are the checks of the whole run.
	Global []Check
	// Aborted says why the run stopped early for a failed step, "" if it
	// did not.
	Aborted string
	// Interrupted is true when the run's context ended before the run did:
	// the report covers the run so far.
	Interrupted bool
	// Terms and Marks are the timeline.
	Terms []TermRecord
	Marks []Mark
	// LostLogLines counts log lines dropped because the output fell behind.
	LostLogLines int
}

// Checks returns the number of checks passed and run.
func (r *Report) Checks() (passed, total int) {
	for _, f := range r.Failovers {
		passed += f.passed()
		total += len(f.Checks)
	}
	for _, c := range r.Global {
		if c.OK {
			passed++
		}
		total++
	}
	return passed, total
}

// OK reports whether the run completed and every check passed.
func (r *Report) OK() bool {
	passed, total := r.Checks()
	return r.Aborted == "" && !r.Interrupted && passed == total && len(r.Failovers) == r.Options.Failovers
}

// verdict is PASS, FAIL or, for a run cut short by its context,
// INTERRUPTED.
func (r *Report) verdict() string {
	switch {
	case r.Interrupted:
		return "INTERRUPTED"
	case r.OK():
		return "PASS"
	}
	return "FAIL"
}

// WriteSummary writes the summary table and the verdict.
func (r *Report) WriteSummary(w io.Writer) error {
	var b strings.Builder
	o := r.Options
	fmt.Fprintf(&b, "\nSUMMARY  %d replicas · %s · lease %v / renew %v / retry %v · seed %d · %v\n\n",
		o.Replicas, count(o.Failovers, "failover"), o.LeaseDuration, o.RenewDeadline, o.RetryPeriod, o.Seed, round(r.Duration))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "#\tFAULT\tFROM\tTERM\tTO\tTERM\tHANDOVER\tTERM-READY\t1ST RENDER\tNEWEST STATE\tOLD TERM FENCED\tCHECKS\t")
	var ready []time.Duration
	for _, f := range r.Failovers {
		fault := string(f.Fault)
		if f.InvalidConfig {
			fault += "*"
		}
		if f.Interrupted {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t-\t-\t-\t-\t-\t-\t-\tinterrupted\t\n", f.N, fault, dash(f.From), f.termColumn())
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%v\t%v\t%v\t%s\t%s\t%d/%d\t\n",
			f.N, fault, f.From, f.termColumn(), dash(f.To), f.NewTerm, round(f.Handover), f.TermReady, round(f.FirstRender),
			yes(f.Newest), yes(f.Fenced), f.passed(), len(f.Checks))
		if f.To != "" {
			ready = append(ready, f.TermReady)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, f := range r.Failovers {
		if f.InvalidConfig {
			b.WriteString("\n* the newest configuration document before this fault was invalid: the new leader rendered the last valid one and published the refusal\n")
			break
		}
	}
	for _, f := range r.Failovers {
		if f.OldTerm != f.FaultTerm && f.OldTerm != 0 {
			b.WriteString("\nhang: FROM TERM is the term the fault hit, then the term the stuck replica led again without its component; the hand-over is from that one\n")
			break
		}
	}
	b.WriteString("\nhandover: from the fault to the new leader's acquiring write; term-ready: from the lease's acquisition to every\nleader-only component holding the replayed state; 1st render: from the acquisition to the term's first TemplateRenderedEvent.\nterm: " + TermExplained + ".\n")
	if len(ready) > 0 {
		slices.Sort(ready)
		fmt.Fprintf(&b, "term-ready after lease acquired: median %v, max %v over %s\n", ready[len(ready)/2], ready[len(ready)-1], count(len(ready), "failover"))
	}
	b.WriteString(r.deathSummary())
	b.WriteString("\n")
	for _, c := range r.Global {
		fmt.Fprintf(&b, "%s  %s", mark(c.OK), c.Name)
		if !c.OK {
			fmt.Fprintf(&b, ": %s", c.Detail)
		}
		b.WriteString("\n")
	}
	for _, f := range r.Failovers {
		for _, c := range f.Checks {
			if !c.OK {
				fmt.Fprintf(&b, "%s  failover %d: %s: %s\n", mark(false), f.N, c.Name, c.Detail)
			}
		}
	}
	if r.Aborted != "" {
		fmt.Fprintf(&b, "%s  run stopped early: %s\n", mark(false), r.Aborted)
	}
	if r.Interrupted {
		done := len(r.Failovers)
		if done > 0 && r.Failovers[done-1].Interrupted {
			done--
		}
		fmt.Fprintf(&b, "interrupted after %d of %s; the report covers the run so far\n", done, count(r.Options.Failovers, "failover"))
	}
	if r.LostLogLines > 0 {
		fmt.Fprintf(&b, "(%d log lines were dropped: the output fell behind)\n", r.LostLogLines)
	}
	passed, total := r.Checks()
	fmt.Fprintf(&b, "\nresult: %s (%d/%d checks passed)\n", r.verdict(), passed, total)
	_, err := io.WriteString(w, b.String())
	return err
}

// deathSummary contrasts, over the crashes and kills handed over, the
// takeovers on the kubelet's report with those that waited the lease out.
func (r *Report) deathSummary() string {
	var reported, silent []time.Duration
	for _, f := range r.Failovers {
		switch {
		case f.Interrupted || f.To == "":
		case f.Fault == FaultCrash:
			reported = append(reported, f.SinceReport)
		case f.Fault == FaultKill:
			silent = append(silent, f.SinceRenew)
		}
	}
	var b strings.Builder
	if len(reported) > 0 {
		slices.Sort(reported)
		fmt.Fprintf(&b, "crash, the kubelet reporting the container terminated: the next term started %s after the report (max over %s; lease %v)\n",
			ms(reported[len(reported)-1]), count(len(reported), "crash failover"), r.Options.LeaseDuration)
	}
	if len(silent) > 0 {
		slices.Sort(silent)
		fmt.Fprintf(&b, "kill, the kubelet silent: the lease was taken %v after the old leader's last renew (min over %s), once the lease rules allowed\n",
			round(silent[0]), count(len(silent), "kill"))
	}
	return b.String()
}

func mark(ok bool) string {
	if ok {
		return "ok  "
	}
	return "FAIL"
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// round shortens durations of a second or more to milliseconds.
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d
}

// count says n of a noun, in the singular for one: "1 server", "3 servers".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// about says how long a run is estimated to take, to the second.
func about(d time.Duration) string {
	if d < time.Second {
		return "under a second"
	}
	return "about " + d.Round(time.Second).String()
}
