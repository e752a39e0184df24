package leaderelection

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// envGroupSeeds sets how many seeds TestKubernetesLeaseGroupWatchRandomized runs (a
// soak); CI runs groupSeeds.
const envGroupSeeds = "BATON_LEASEGROUP_SEEDS"

const groupSeeds = 20

// TestKubernetesLeaseGroupWatchRandomized: store watches of a group open at random
// moments, many at once, while a writer creates, updates and deletes the group's
// Leases at random. Each watch must see a state no older than the one current when
// Watch was called, then every state after it, none skipped or out of order, to the
// Lease's last (checkGroupWatch). A failing seed replays:
// BATON_LEASEGROUP_SEED=N.
func TestKubernetesLeaseGroupWatchRandomized(t *testing.T) {
	seeds := []uint64{}
	if s := os.Getenv("BATON_LEASEGROUP_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("BATON_LEASEGROUP_SEED=%q: %v", s, err)
		}
		seeds = append(seeds, n)
	} else {
		count := groupSeeds
		if s := os.Getenv(envGroupSeeds); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive number", envGroupSeeds, s)
			}
			count = n
		}
		for i := range count {
			seeds = append(seeds, uint64(i+1))
		}
	}
	for _, seed := range seeds {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { groupWatchHistory(t, seed) })
		})
	}
}

// groupHistory is the states each Lease of a group went through, as keys ("absent",
// or "rv:<resourceVersion>"), and what each watch saw.
type groupHistory struct {
	mu     sync.Mutex
	states map[string][]string
}

func (h *groupHistory) add(name, key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.states[name] = append(h.states[name], key)
}

// at returns how many states name had gone through (its current state's index + 1).
func (h *groupHistory) at(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.states[name])
}

func stateKey(ev LeaseEvent) string {
	if ev.Deleted {
		return "absent"
	}
	return "rv:" + ev.Record.ResourceVersion
}

func groupWatchHistory(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x6c65617365))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := versionedClientset()
	g, err := NewKubernetesLeaseGroup(ctxClientset{cs}, "ns", "ring", "r")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"r-shard-0", "r-shard-1", "r-shard-2"}
	h := &groupHistory{states: map[string][]string{}}
	for _, n := range names {
		h.add(n, "absent")
	}
	type watcher struct {
		name  string
		since int // states the Lease had gone through when Watch was called
		seen  []string
	}
	const steps, watchers = 60, 10
	ws := make([]*watcher, watchers)
	var wg sync.WaitGroup
	for i := range ws {
		w := &watcher{name: names[rng.IntN(len(names))]}
		ws[i] = w
		delay := time.Duration(rng.IntN(steps*2)) * time.Millisecond
		wg.Go(func() {
			time.Sleep(delay)
			w.since = h.at(w.name)
			events, err := g.Store(w.name).Watch(ctx)
			if err != nil {
				t.Errorf("watch %s: %v", w.name, err)
				return
			}
			for ev := range events {
				if ev.Err != nil {
					if ctx.Err() == nil {
						t.Errorf("watch %s: %v", w.name, ev.Err)
					}
					return
				}
				w.seen = append(w.seen, stateKey(ev))
			}
		})
	}
	last := map[string]LeaseRecord{}
	for range steps {
		time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
		n := names[rng.IntN(len(names))]
		r, ok := last[n]
		switch {
		case !ok:
			r, err = g.Store(n).Create(ctx, LeaseRecord{HolderIdentity: "h", LeaseDuration: time.Second})
		case rng.IntN(6) == 0:
			err = cs.CoordinationV1().Leases("ns").Delete(ctx, n, metav1.DeleteOptions{})
		default:
			r.HolderIdentity = fmt.Sprintf("h%d", rng.IntN(100))
			r, err = g.Store(n).Update(ctx, r)
		}
		if err != nil {
			t.Fatalf("write %s: %v", n, err)
		}
		if !ok || r.ResourceVersion != last[n].ResourceVersion {
			last[n] = r
			h.add(n, "rv:"+r.ResourceVersion)
		} else {
			delete(last, n)
			h.add(n, "absent")
		}
	}
	time.Sleep(steps * 2 * time.Millisecond) // every watch opened
	synctest.Wait()                          // and took every event
	cancel()
	wg.Wait()
	for i, w := range ws {
		if err := checkGroupWatch(h.states[w.name], w.since, w.seen); err != nil {
			t.Errorf("seed %d, watch %d of %s (called after %d states): %v\n  history %v\n  seen    %v",
				seed, i, w.name, w.since, err, h.states[w.name], w.seen)
		}
	}
}

// checkGroupWatch reports how seen (a watch's states, from its first event) is not
// what a watch must show: the state it listed, history[l] for some l at or after
// since-1 (the state current when Watch was called), then every state after it, in
// order, to the last. The fake clientset's list carries no resourceVersion, so the
// store cannot skip the events at or below the list as it does on a real API server:
// those the shared watch delivered after the subscription (some written before the
// call, still on their way) come again after the listed state, so seen may go on
// from an earlier state, history[s:] for some s up to l+1, never a later one. A
// watch that listed before it subscribed misses the states between (s after l+1).
func checkGroupWatch(history []string, since int, seen []string) error {
	if len(seen) == 0 {
		return fmt.Errorf("no event")
	}
	for l := max(since-1, 0); l < len(history); l++ {
		if history[l] != seen[0] {
			continue
		}
		for s := 0; s <= l+1; s++ {
			if slices.Equal(history[s:], seen[1:]) {
				return nil
			}
		}
	}
	return fmt.Errorf("not the listed state and then every state after it")
}
