package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// fingerprint renders everything the checker judges in a history (the schedule, the
// faults as injected, each term as believed, each fenced write, the probes) with times
// relative to the history's start, in an order that does not depend on which of two
// goroutines recorded first at one instant. Two runs of a seed that replays exactly
// have equal fingerprints.
func (h *history) fingerprint() string {
	var b strings.Builder
	for _, l := range h.sched {
		fmt.Fprintf(&b, "schedule %s\n", l)
	}
	h.mu.Lock()
	var lines []string
	for _, f := range h.faults {
		lines = append(lines, fmt.Sprintf("fault %s %s", h.rel(f.at), f.text))
	}
	for _, p := range h.probes {
		leaders := slices.Clone(p.leaders)
		slices.Sort(leaders)
		down := slices.Clone(p.down)
		slices.Sort(down)
		lines = append(lines, fmt.Sprintf("probe %s leaders %v terms %v views %v down %v",
			h.rel(p.at), leaders, p.terms, p.views, down))
	}
	h.mu.Unlock()
	slices.Sort(lines)
	b.WriteString(strings.Join(lines, "\n"))
	terms := h.snapshotTerms()
	slices.SortFunc(terms, func(x, y termRec) int {
		return cmp.Or(x.start.Compare(y.start), cmp.Compare(x.who, y.who))
	})
	for _, t := range terms {
		fmt.Fprintf(&b, "\nterm %s %d [%s, %s) %s", t.who, t.term, h.rel(t.start), h.rel(t.end), causeName(t.cause))
	}
	ops := h.reg.snapshot()
	slices.SortFunc(ops, func(x, y regOp) int {
		return cmp.Or(x.call.Compare(y.call), x.ret.Compare(y.ret), cmp.Compare(x.who, y.who))
	})
	for _, o := range ops {
		fmt.Fprintf(&b, "\nwrite %s term %d [%s, %s] accepted %v", o.who, o.term, h.rel(o.call), h.rel(o.ret), o.accepted)
	}
	if h.kube != nil {
		ks := h.kube.snapshot()
		for _, p := range ks.proofs {
			fmt.Fprintf(&b, "\nproof to %s of %s at %s", p.watcher, p.inc, h.rel(p.at))
		}
	}
	fmt.Fprintf(&b, "\ncounts %s", strings.ReplaceAll(h.count.String(), "\n", ";"))
	return b.String()
}

// firstDiff returns the first line where a and b differ, with its number.
func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(la), len(lb)) {
		x, y := "<end>", "<end>"
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  first:  %s\n  second: %s", i+1, x, y)
		}
	}
	return ""
}

// TestChaosReplay: a seed replays bit for bit. Each of a few seeds (with clock skew,
// faults of every kind; half as many of the kubelet histories) runs twice, and the recorded histories must be equal: the
// schedule, the faults as injected, every term as believed and every fenced write, to
// the nanosecond of fake time.
func TestChaosReplay(t *testing.T) {
	replaySeeds := int64(10)
	if testing.Short() {
		replaySeeds = 3
	}
	skew := skewMode{on: true}
	for seed := int64(1); seed <= replaySeeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			ha, hb := runMemory(t, seed, skew), runMemory(t, seed, skew)
			if a, b := ha.fingerprint(), hb.fingerprint(); a != b {
				t.Errorf("seed %d: two runs differ at %s\nelector logs first differ at %s", seed, firstDiff(a, b),
					firstDiff(ha.logs.String(), hb.logs.String()))
			}
		})
	}
	// The kubelet histories replay too: the proofs each death watch was given, with the
	// rest.
	for seed := int64(1); seed <= replaySeeds/2; seed++ {
		t.Run(fmt.Sprint("kubelet/", seed), func(t *testing.T) {
			t.Parallel()
			ha, hb := runKubelet(t, seed, skew), runKubelet(t, seed, skew)
			if a, b := ha.fingerprint(), hb.fingerprint(); a != b {
				t.Errorf("kubelet seed %d: two runs differ at %s\nelector logs first differ at %s", seed, firstDiff(a, b),
					firstDiff(ha.logs.String(), hb.logs.String()))
			}
		})
	}
}
