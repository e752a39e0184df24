// Package shardingtest helps test code built on package sharding: a History of the
// shard terms of a ring's replicas, with the checks every sharded test wants (never
// two owners of a shard, balanced shares, how long shards went without owner).
package shardingtest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/termctx"
)

// History records every shard term of a ring as its OnAcquired saw it: from the call
// to the end of its context. Safe for concurrent use.
type History struct {
	shards int

	// mu guards the fields below.
	mu      sync.Mutex
	changed chan struct{}
	open    map[int]map[string]time.Time // shard -> owner -> start
	terms   []shardTermSpan
	errors  []string
}

type shardTermSpan struct {
	shard      int
	owner      string
	term       uint64
	start, end time.Time // end zero while open
}

// NewHistory returns an empty History of a ring of shards shards.
func NewHistory(shards int) *History {
	return &History{shards: shards, open: map[int]map[string]time.Time{}, changed: make(chan struct{})}
}

// OnAcquired returns the Callbacks.OnAcquired of replica id: it records the term
// from the call until its context ends.
func (h *History) OnAcquired(tb testing.TB, id string) func(ctx context.Context) {
	return func(ctx context.Context) {
		st, ok := sharding.ShardTermOf(termctx.Get(ctx))
		if !ok {
			tb.Errorf("%s: OnAcquired's context carries no shard term", id)
			return
		}
		h.acquired(st, id)
		<-ctx.Done()
		h.lost(st, id)
	}
}

// Changed returns a channel closed at the next start or end of a term.
func (h *History) Changed() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// notifyLocked closes the channel of Changed and makes the next.
func (h *History) notifyLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

func (h *History) acquired(st sharding.ShardTerm, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if others := h.open[st.Shard]; len(others) > 0 {
		h.errors = append(h.errors, fmt.Sprintf("%v: shard %d taken by %s (term %d) while led by %v", now, st.Shard, id, st.Term, others))
	}
	if h.open[st.Shard] == nil {
		h.open[st.Shard] = map[string]time.Time{}
	}
	h.open[st.Shard][id] = now
	h.terms = append(h.terms, shardTermSpan{shard: st.Shard, owner: id, term: st.Term, start: now})
	h.notifyLocked()
}

func (h *History) lost(st sharding.ShardTerm, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.open[st.Shard], id)
	for i := len(h.terms) - 1; i >= 0; i-- {
		if h.terms[i].shard == st.Shard && h.terms[i].owner == id && h.terms[i].end.IsZero() {
			h.terms[i].end = time.Now()
			h.notifyLocked()
			return
		}
	}
}

// Balanced returns the shares of members when every shard has exactly one owner, one
// of members, and the shares differ by at most one; otherwise an error that says
// what is wrong.
func (h *History) Balanced(members ...string) (map[string]int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	count := map[string]int{}
	for shard := range h.shards {
		var owners []string
		for o := range h.open[shard] {
			owners = append(owners, o)
		}
		if len(owners) != 1 || !slices.Contains(members, owners[0]) {
			return nil, fmt.Errorf("shard %d owned by %v, want one of %v", shard, owners, members)
		}
		count[owners[0]]++
	}
	lo, hi := h.shards, 0
	for _, m := range members {
		lo, hi = min(lo, count[m]), max(hi, count[m])
	}
	if hi-lo > 1 {
		return nil, fmt.Errorf("shares %v, want within one shard", count)
	}
	return count, nil
}

// Shares returns how many shards each owner holds now, counting the shards that have
// exactly one owner.
func (h *History) Shares() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	count := map[string]int{}
	for shard := range h.shards {
		if len(h.open[shard]) != 1 {
			continue
		}
		for o := range h.open[shard] {
			count[o]++
		}
	}
	return count
}

// CheckBalanced fails tb unless Balanced(members...).
func (h *History) CheckBalanced(tb testing.TB, after string, members ...string) {
	tb.Helper()
	count, err := h.Balanced(members...)
	if err != nil {
		tb.Fatalf("after %s: %v", after, err)
	}
	tb.Logf("after %s: shares %v", after, count)
}

// CheckGaps fails tb unless every shard whose term ended since from had its next term
// begin within limit, and logs the median, 99th percentile and longest gap, and when
// the last shard was owned again. It returns the longest gap. A move still under way
// (a term ended less than limit ago, its next not begun) is waited for, up to limit:
// the shares may look balanced before the last moves of a rebalance.
func (h *History) CheckGaps(t testing.TB, phase string, from time.Time, limit time.Duration) time.Duration {
	t.Helper()
	for {
		end, ok := h.ownerlessSince(from)
		if !ok || time.Since(end) > limit {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var settled time.Duration
	var gaps []time.Duration
	for _, ended := range h.terms {
		if ended.end.IsZero() || ended.end.Before(from) {
			continue
		}
		next := time.Time{}
		for _, s := range h.terms {
			if s.shard == ended.shard && !s.start.Before(ended.end) && (next.IsZero() || s.start.Before(next)) {
				next = s.start
			}
		}
		if next.IsZero() {
			t.Fatalf("%s: shard %d has no owner since %v", phase, ended.shard, ended.end)
		}
		gaps = append(gaps, next.Sub(ended.end))
		settled = max(settled, next.Sub(from))
	}
	if len(gaps) == 0 {
		t.Logf("%s: no shard moved", phase)
		return 0
	}
	slices.Sort(gaps)
	worst := gaps[len(gaps)-1]
	if worst > limit {
		t.Fatalf("%s: a shard went %v without owner, want at most %v", phase, worst, limit)
	}
	t.Logf("%s: %d shards moved; without owner: median %v, p99 %v, longest %v; last owned again %v after the fault",
		phase, len(gaps), gaps[len(gaps)/2], gaps[(len(gaps)*99)/100], worst, settled)
	return worst
}

// ownerlessSince returns the earliest end, since from, of a term whose shard has had
// no term since; ok is false when there is none.
func (h *History) ownerlessSince(from time.Time) (end time.Time, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ended := range h.terms {
		if ended.end.IsZero() || ended.end.Before(from) {
			continue
		}
		if !slices.ContainsFunc(h.terms, func(s shardTermSpan) bool { return s.shard == ended.shard && !s.start.Before(ended.end) }) &&
			(!ok || ended.end.Before(end)) {
			end, ok = ended.end, true
		}
	}
	return end, ok
}

// CheckAllEnded fails tb if a term is open (call it once every replica stopped).
func (h *History) CheckAllEnded(t testing.TB) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.terms {
		if s.end.IsZero() {
			t.Errorf("shard %d: %s's term %d still open after every replica stopped", s.shard, s.owner, s.term)
		}
	}
}

// CheckNoOverlap fails tb if two terms of a shard overlapped (one began while
// another was open, as seen by their OnAcquired calls) or a shard's terms did not
// rise.
func (h *History) CheckNoOverlap(t testing.TB) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.errors {
		t.Errorf("%s", e)
	}
	byShard := map[int][]shardTermSpan{}
	for _, s := range h.terms {
		byShard[s.shard] = append(byShard[s.shard], s)
	}
	for shard, spans := range byShard {
		sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
		for i := 1; i < len(spans); i++ {
			prev := spans[i-1]
			if prev.end.IsZero() || spans[i].start.Before(prev.end) {
				t.Errorf("shard %d: %s's term %d (from %v) began before %s's term %d ended (%v)",
					shard, spans[i].owner, spans[i].term, spans[i].start, prev.owner, prev.term, prev.end)
			}
			if spans[i].term <= prev.term {
				t.Errorf("shard %d: term %d after term %d", shard, spans[i].term, prev.term)
			}
		}
	}
	t.Logf("%d shard terms, none overlapping", len(h.terms))
}
