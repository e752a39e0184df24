package sharded

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kinds of violation.
const (
	vOverlap        = "two owners of a shard at once"
	vTermOrder      = "shard terms not rising"
	vRegister       = "fenced register not linearizable (a write of an ended term accepted)"
	vUnowned        = "shard without one live owner after the bound"
	vUnbalanced     = "shares unbalanced after the bound"
	vUnstable       = "shard moved after settling"
	vSettledRefused = "settled owner's write refused"
)

// outcome is what a history gives the checker.
type outcome struct {
	shards int
	spans  []span
	ops    []regOp
	begin  time.Time
	// heal is when the faults stopped; checkAt = heal + the bound; stableUntil is a
	// LeaseDuration later. live are the members at the end (joined, not left or crashed).
	heal, checkAt, stableUntil time.Time
	live                       []string
	objs                       objOutcome
}

type violation struct{ kind, msg string }

// result is the checker's verdict on one history, with its figures.
type result struct {
	violations   []violation
	coldOverlaps int           // overlaps in the elector's documented cold-start window
	coldLongest  time.Duration // the longest of them
	late         int           // accepted writes answered after their term ended (fencing made them harmless)
	refused      int           // writes the register refused
	settled      time.Duration // from heal to the last start or end of a term before checkAt
	shares       map[string]int
}

func (r *result) fail(kind, format string, args ...any) {
	r.violations = append(r.violations, violation{kind, fmt.Sprintf(format, args...)})
}

// check checks one history.
func check(o outcome) *result {
	r := &result{}
	byShard := map[int][]span{}
	for _, s := range o.spans {
		byShard[s.shard] = append(byShard[s.shard], s)
	}
	far := o.stableUntil.Add(time.Hour)
	for shard, spans := range byShard {
		slices.SortStableFunc(spans, func(a, b span) int { return a.start.Compare(b.start) })
		for j, b := range spans {
			for _, a := range spans[:j] {
				if b.term <= a.term {
					r.fail(vTermOrder, "shard %d: %s's term %d began at %v, after %s's term %d", shard, b.who, b.term, o.rel(b.start), a.who, a.term)
				}
				if !b.start.Before(a.endOr(far)) {
					continue
				}
				hi := b
				if a.term > b.term {
					hi = a
				}
				if hi.cold {
					r.coldOverlaps++
					end := a.endOr(far)
					if b.endOr(far).Before(end) {
						end = b.endOr(far)
					}
					r.coldLongest = max(r.coldLongest, end.Sub(b.start))
					continue
				}
				r.fail(vOverlap, "shard %d: %s's term %d [%v, %v] and %s's term %d [%v, %v]", shard,
					a.who, a.term, o.rel(a.start), o.rel(a.end), b.who, b.term, o.rel(b.start), o.rel(b.end))
			}
		}
	}
	checkRegister(o, r)
	checkSettled(o, r)
	checkObjects(o, r)
	slices.SortStableFunc(r.violations, func(a, b violation) int { return cmp.Compare(a.kind, b.kind) })
	return r
}

// rel is t relative to the start of the history, for messages.
func (o outcome) rel(t time.Time) string {
	if t.IsZero() {
		return "open"
	}
	return t.Sub(o.begin).String()
}

type regIn struct {
	who  string
	term uint64
}

type regState struct {
	top uint64
	who string
}

// fencedModel accepts a write exactly when its term is above every term written
// before, or equal to it from the same writer (one term, one writer).
var fencedModel = porcupine.Model{
	Init: func() any { return regState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, accepted := state.(regState), input.(regIn), output.(bool)
		ok := in.term > s.top || (in.term == s.top && in.who == s.who)
		if ok {
			return accepted, regState{in.term, in.who}
		}
		return !accepted, s
	},
	Equal: func(a, b any) bool { return a == b },
}

func checkRegister(o outcome, r *result) {
	ends := map[string]time.Time{}
	for _, s := range o.spans {
		ends[fmt.Sprint(s.shard, s.who, s.term)] = s.end
	}
	byObj := map[int][]porcupine.Operation{}
	for _, op := range o.ops {
		if !op.answered {
			continue
		}
		if !op.accepted {
			r.refused++
		} else if end := ends[fmt.Sprint(op.obj/objectsPerShard, op.who, op.term)]; !end.IsZero() && op.ret.After(end) {
			r.late++
		}
		byObj[op.obj] = append(byObj[op.obj], porcupine.Operation{
			ClientId: 0, Input: regIn{op.who, op.term}, Output: op.accepted,
			Call: op.call.Sub(o.begin).Nanoseconds(), Return: op.ret.Sub(o.begin).Nanoseconds(),
		})
	}
	for obj, ops := range byObj {
		if !porcupine.CheckOperations(fencedModel, ops) {
			var b strings.Builder
			for _, op := range o.ops {
				if op.obj == obj && op.answered {
					fmt.Fprintf(&b, "\n  [%v, %v] %s term %d accepted %v", o.rel(op.call), o.rel(op.ret), op.who, op.term, op.accepted)
				}
			}
			r.fail(vRegister, "object %d:%s", obj, b.String())
		}
	}
}

// checkSettled: at checkAt every shard has exactly one owner, a live member, the
// shares are within one shard, and until stableUntil no shard moves and the owners'
// writes are accepted.
func checkSettled(o outcome, r *result) {
	owner := map[int][]span{}
	for _, s := range o.spans {
		if !s.start.After(o.checkAt) && s.endOr(o.stableUntil.Add(time.Hour)).After(o.checkAt) {
			owner[s.shard] = append(owner[s.shard], s)
		}
		for _, t := range []time.Time{s.start, s.end} {
			if !t.Before(o.heal) && !t.After(o.checkAt) {
				r.settled = max(r.settled, t.Sub(o.heal))
			}
		}
		if s.start.After(o.checkAt) && s.start.Before(o.stableUntil) {
			r.fail(vUnstable, "shard %d: %s's term %d began at %v, after the bound (%v)", s.shard, s.who, s.term, o.rel(s.start), o.rel(o.checkAt))
		}
		if !s.end.IsZero() && s.end.After(o.checkAt) && s.end.Before(o.stableUntil) {
			r.fail(vUnstable, "shard %d: %s's term %d ended at %v, after the bound (%v)", s.shard, s.who, s.term, o.rel(s.end), o.rel(o.checkAt))
		}
	}
	r.shares = map[string]int{}
	for _, m := range o.live {
		r.shares[m] = 0
	}
	for shard := range o.shards {
		owners := owner[shard]
		if len(owners) != 1 || !slices.Contains(o.live, owners[0].who) {
			var who []string
			for _, s := range owners {
				who = append(who, s.who)
			}
			r.fail(vUnowned, "shard %d at %v: owned by %v, want one of %v", shard, o.rel(o.checkAt), who, o.live)
			continue
		}
		r.shares[owners[0].who]++
	}
	if len(o.live) > 0 {
		counts := make([]int, 0, len(o.live))
		for _, m := range o.live {
			counts = append(counts, r.shares[m])
		}
		if slices.Max(counts)-slices.Min(counts) > 1 {
			r.fail(vUnbalanced, "shares %v at %v", r.shares, o.rel(o.checkAt))
		}
	}
	for _, op := range o.ops {
		if !op.answered || op.accepted || !op.call.After(o.checkAt) || !op.call.Before(o.stableUntil) {
			continue
		}
		for _, s := range owner[op.obj/objectsPerShard] {
			if s.who == op.who && s.term == op.term {
				r.fail(vSettledRefused, "object %d: %s's write of term %d at %v refused", op.obj, op.who, op.term, o.rel(op.call))
			}
		}
	}
	slices.SortFunc(r.violations, func(a, b violation) int { return cmp.Compare(a.kind, b.kind) })
}
