package shardbench

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"
)

// interval is one reconcile of one object: who ran it, under which (shard) term,
// when, and which version of the object it read.
type interval struct {
	replica    string
	shard      int // -1 for the single leader
	term       uint64
	start, end time.Time
	version    uint64 // the resourceVersion read after the gate; 0 if none was read
	done       bool   // the work finished (not cut short by the end of the term)
}

// ledger records every reconcile of one configuration's run.
type ledger struct {
	// mu guards the fields below.
	mu        sync.Mutex
	intervals map[string][]interval // by object name
	// reconciled is the highest version of each object whose reconcile finished.
	reconciled map[string]uint64
	// target is the versions awaited (await), and behind how many of them are not
	// reconciled yet: kept up by record, so that waiting costs the reconciles nothing.
	target map[string]uint64
	behind int
}

func newLedger() *ledger {
	return &ledger{intervals: map[string][]interval{}, reconciled: map[string]uint64{}}
}

func (l *ledger) record(name string, iv interval) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.intervals[name] = append(l.intervals[name], iv)
	if old := l.reconciled[name]; iv.done && iv.version > old {
		l.reconciled[name] = iv.version
		if t, ok := l.target[name]; ok && old < t && iv.version >= t {
			l.behind--
		}
	}
}

// await sets the versions that caughtUp waits for.
func (l *ledger) await(want map[string]uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.target, l.behind = want, 0
	for name, v := range want {
		if l.reconciled[name] < v {
			l.behind++
		}
	}
}

// caughtUp reports whether every object had at least its awaited version reconciled.
func (l *ledger) caughtUp() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.behind == 0
}

// snapshot returns a copy of the intervals.
func (l *ledger) snapshot() map[string][]interval {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string][]interval, len(l.intervals))
	for k, v := range l.intervals {
		out[k] = slices.Clone(v)
	}
	return out
}

// check returns the violations in the intervals: an object whose latest version
// (latest) was not reconciled; an object reconciled twice at once (by two workers or
// two replicas); and, for a sharded run (shardOf names each object's shard), a
// reconcile under a shard term of another shard, a shard term seen by two replicas,
// or two replicas reconciling objects of one shard at once. Every interval must have
// ended.
func check(intervals map[string][]interval, latest map[string]uint64, shardOf map[string]int) []string {
	var out []string
	for _, name := range sortedKeys(latest) {
		var best uint64
		for _, iv := range intervals[name] {
			if iv.done && iv.version > best {
				best = iv.version
			}
		}
		if best < latest[name] {
			out = append(out, fmt.Sprintf("%s: latest version %d not reconciled (last reconciled %d)", name, latest[name], best))
		}
	}
	type shardTerm struct {
		shard int
		term  uint64
	}
	termOwner := map[shardTerm]string{}
	byShard := map[int][]interval{}
	for _, name := range sortedKeys(intervals) {
		ivs := slices.Clone(intervals[name])
		slices.SortFunc(ivs, func(a, b interval) int { return a.start.Compare(b.start) })
		var prev interval
		for i, iv := range ivs {
			if iv.end.IsZero() || iv.end.Before(iv.start) {
				out = append(out, fmt.Sprintf("%s: a reconcile by %s from %v has no end", name, iv.replica, iv.start.Format(time.StampMicro)))
				continue
			}
			if i > 0 && iv.start.Before(prev.end) {
				out = append(out, fmt.Sprintf("%s: reconciled at once by %s (shard %d term %d, until %v) and %s (shard %d term %d, from %v)",
					name, prev.replica, prev.shard, prev.term, prev.end.Format(time.StampMicro), iv.replica, iv.shard, iv.term, iv.start.Format(time.StampMicro)))
			}
			if i == 0 || iv.end.After(prev.end) {
				prev = iv
			}
			if shardOf == nil {
				continue
			}
			if want, ok := shardOf[name]; !ok || iv.shard != want || iv.term == 0 {
				out = append(out, fmt.Sprintf("%s (shard %d): reconciled by %s under shard %d term %d", name, shardOf[name], iv.replica, iv.shard, iv.term))
				continue
			}
			st := shardTerm{iv.shard, iv.term}
			if o, seen := termOwner[st]; seen && o != iv.replica {
				out = append(out, fmt.Sprintf("shard %d term %d seen by %s and %s", iv.shard, iv.term, o, iv.replica))
			}
			termOwner[st] = iv.replica
			byShard[iv.shard] = append(byShard[iv.shard], iv)
		}
	}
	for _, shard := range sortedKeys(byShard) {
		ivs := byShard[shard]
		slices.SortFunc(ivs, func(a, b interval) int { return a.start.Compare(b.start) })
		lastEnd := map[string]time.Time{} // the latest end of each replica's reconciles so far
		for _, iv := range ivs {
			for other, end := range lastEnd {
				if other != iv.replica && iv.start.Before(end) {
					out = append(out, fmt.Sprintf("shard %d reconciled by %s (until %v) and %s (from %v) at once",
						shard, other, end.Format(time.StampMicro), iv.replica, iv.start.Format(time.StampMicro)))
				}
			}
			if iv.end.After(lastEnd[iv.replica]) {
				lastEnd[iv.replica] = iv.end
			}
		}
	}
	return out
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
