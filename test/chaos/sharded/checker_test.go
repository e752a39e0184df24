package sharded

import (
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// TestCheckerFindsViolations feeds the checker hand-made histories of a ring of 2
// shards, each with one known fault, and clean ones: it must name exactly the broken
// properties.
func TestCheckerFindsViolations(t *testing.T) {
	term := func(shard int, who string, n uint64, from, to float64) span {
		s := span{shard: shard, who: who, term: n, start: at(from)}
		if to >= 0 {
			s.end = at(to)
		}
		return s
	}
	cold := func(s span) span { s.cold = true; return s }
	write := func(obj int, who string, n uint64, when float64, ok bool) regOp {
		return regOp{obj: obj, who: who, term: n, call: at(when), ret: at(when + 0.01), accepted: ok, answered: true}
	}
	// Both shards settled from 40s: shard 0 on a (term 10), shard 1 on b (term 11).
	settled := []span{term(0, "a", 10, 40, -1), term(1, "b", 11, 40, -1)}
	with := func(spans ...span) []span { return append(slices.Clone(settled), spans...) }
	tests := []struct {
		name  string
		spans []span
		ops   []regOp
		live  []string
		want  []string
	}{
		{"clean", with(term(0, "b", 2, 0, 10), term(0, "a", 3, 10, 20)),
			[]regOp{write(0, "b", 2, 5, true), write(0, "a", 3, 15, true), write(0, "b", 2, 16, false), write(0, "a", 10, 50, true)}, nil, nil},
		{"back to back is no overlap", with(term(0, "b", 2, 0, 10), term(0, "a", 3, 10, 20)), nil, nil, nil},
		{"overlap", with(term(0, "b", 2, 0, 10), term(0, "a", 3, 9.9, 20)), nil, nil, []string{vOverlap}},
		{"overlap of a cold start above the old term is the elector's window",
			with(term(0, "b", 2, 0, 10), cold(term(0, "a", 3, 9.9, 20))), nil, nil, nil},
		{"overlap of a cold start below the old term", with(term(0, "b", 3, 0, 10), cold(term(0, "a", 2, 9.9, 20))), nil, nil,
			[]string{vOverlap, vTermOrder}},
		{"terms not rising", with(term(0, "b", 3, 0, 10), term(0, "a", 2, 10, 20)), nil, nil, []string{vTermOrder}},
		{"register accepts an ended term after a newer one", with(term(0, "b", 2, 0, 10), term(0, "a", 3, 10, 20)),
			[]regOp{write(0, "a", 3, 12, true), write(0, "b", 2, 13, true)}, nil, []string{vRegister}},
		{"one term, two writers", with(term(0, "b", 2, 0, 10), term(0, "a", 3, 10, 20)),
			[]regOp{write(0, "b", 3, 5, true), write(0, "a", 3, 12, true)}, nil, []string{vRegister}},
		{"a paused writer's late write before the newer term wrote is fenced, not failed", with(term(0, "b", 2, 0, 10), term(0, "a", 3, 10, 20)),
			[]regOp{{obj: 0, who: "b", term: 2, call: at(9), ret: at(11), accepted: true, answered: true}, write(0, "a", 3, 12, true)}, nil, nil},
		{"no owner after the bound", []span{term(0, "a", 10, 40, -1), term(1, "b", 11, 40, 45)}, nil, nil, []string{vUnowned}},
		{"owner not live", settled, nil, []string{"a"}, []string{vUnowned}},
		{"unbalanced", []span{term(0, "a", 10, 40, -1), term(1, "a", 11, 40, -1)}, nil, nil, []string{vUnbalanced}},
		{"moved after settling", []span{term(0, "a", 10, 40, -1), term(1, "b", 11, 40, 57), term(1, "a", 12, 57, -1)}, nil, nil,
			[]string{vUnstable}},
		{"settled owner refused", settled, []regOp{write(0, "a", 10, 57, false)}, nil, []string{vRegister, vSettledRefused}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := tt.live
			if live == nil {
				live = []string{"a", "b"}
			}
			r := check(outcome{shards: 2, spans: tt.spans, ops: tt.ops, begin: t0, heal: at(45), checkAt: at(52), stableUntil: at(60), live: live})
			var got []string
			for _, v := range r.violations {
				if !slices.Contains(got, v.kind) {
					got = append(got, v.kind)
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(got, want) {
				t.Errorf("violations %v, want %v (%v)", got, want, r.violations)
			}
		})
	}
}
