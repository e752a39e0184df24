package events

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFIFOAgainstModel runs random operations on a fifo and on a plain
// slice that does the same in O(n), and compares them after each step. CI
// runs seeds 1 to 8; BATON_FRESH_SEEDS=<n> runs n fresh ones, and
// BATON_SEED=<seed> replays the seed a failure names.
func TestFIFOAgainstModel(t *testing.T) {
	for _, seed := range testSeeds(t, 1, 2, 3, 4, 5, 6, 7, 8) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { checkFIFOAgainstModel(t, seed) })
	}
}

func checkFIFOAgainstModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	type item struct {
		v     int
		class int32
	}
	for round := range 200 {
		limit, classes := 1+rng.IntN(8), 1+rng.IntN(4)
		q := newFIFO[int](limit, classes)
		var model []item
		for step := range 200 {
			switch op := rng.IntN(3); {
			case op == 0 && !q.full():
				c := int32(rng.IntN(classes))
				q.push(step, c)
				model = append(model, item{step, c})
			case op == 1:
				v, ok := q.pop()
				if ok != (len(model) > 0) || ok && v != model[0].v {
					t.Fatalf("round %d step %d: pop = %d, %v; model %v", round, step, v, ok, model)
				}
				if ok {
					model = model[1:]
				}
			default:
				c := int32(rng.IntN(classes))
				v, ok := q.removeOldest(c)
				at := slices.IndexFunc(model, func(it item) bool { return it.class == c })
				if ok != (at >= 0) || ok && v != model[at].v {
					t.Fatalf("round %d step %d: removeOldest(%d) = %d, %v; model %v", round, step, c, v, ok, model)
				}
				if ok {
					model = slices.Delete(model, at, at+1)
				}
			}
			if q.len() != len(model) || q.full() != (len(model) >= limit) {
				t.Fatalf("round %d step %d: len %d full %v; model %v", round, step, q.len(), q.full(), model)
			}
			for c := range int32(classes) {
				if q.has(c) != slices.ContainsFunc(model, func(it item) bool { return it.class == c }) {
					t.Fatalf("round %d step %d: has(%d) = %v; model %v", round, step, c, q.has(c), model)
				}
			}
		}
		if len(q.nodes) > limit {
			t.Fatalf("round %d: arena grew to %d nodes past the limit %d", round, len(q.nodes), limit)
		}
	}
}
