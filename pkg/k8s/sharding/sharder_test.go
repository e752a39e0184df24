package sharding_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// Timing of the sharder tests: short, so histories are short in fake time.
const (
	testLease   = 3 * time.Second
	testRenew   = 2 * time.Second
	testRetry   = 500 * time.Millisecond
	testShards  = 16
	handoverGap = 100 * time.Millisecond // the most a planned move may leave a shard without owner
	memberLag   = 50 * time.Millisecond  // how late each replica sees member Leases change
)

// TestSharderFaults runs 3 replicas on in-memory stores in a synctest bubble, then a
// join, a graceful leave and a crash. It checks that no shard ever has two owners
// (the term of the old one ended before the new one's began), that after each fault
// every shard has one owner and the shares are within one shard, and how long
// shards were without an owner: at most handoverGap on a join or a graceful leave, at
// most LeaseDuration + 2·RetryPeriod after a crash.
func TestSharderFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHistory()
		stores := sharding.NewMemoryStores(testShards)
		replicas := map[string]*replica{}
		start := func(id string) { replicas[id] = startReplica(t, stores, id, h) }
		defer func() { // also after a Fatal, so that the bubble's goroutines end
			for _, r := range replicas {
				r.stop()
			}
		}()

		for _, id := range []string{"a", "b", "c"} {
			start(id)
		}
		time.Sleep(10 * time.Second)
		h.checkBalanced(t, "start", "a", "b", "c")

		phase := time.Now()
		start("d")
		time.Sleep(5 * time.Second)
		h.checkBalanced(t, "join of d", "a", "b", "c", "d")
		h.checkGaps(t, "join of d", phase, handoverGap)

		phase = time.Now()
		replicas["b"].stop()
		time.Sleep(5 * time.Second)
		h.checkBalanced(t, "graceful leave of b", "a", "c", "d")
		h.checkGaps(t, "graceful leave of b", phase, handoverGap)

		phase = time.Now()
		replicas["c"].crash()
		time.Sleep(4 * testLease)
		h.checkBalanced(t, "crash of c", "a", "d")
		h.checkGaps(t, "crash of c", phase, testLease+2*testRetry)

		for _, r := range replicas {
			r.stop()
		}
		h.checkNoOverlap(t)
		h.checkAllEnded(t)
		for _, r := range replicas {
			if r.err != nil {
				t.Errorf("Run of %s: %v", r.id, r.err)
			}
		}
	})
}

// replica is one Sharder on stores that a crash cuts off.
type replica struct {
	id      string
	sharder *sharding.Sharder
	cancel  context.CancelFunc
	done    chan struct{}
	down    chan struct{} // closed by crash
	err     error
}

func startReplica(t *testing.T, shared sharding.Stores, id string, h *history) *replica {
	t.Helper()
	r := &replica{id: id, done: make(chan struct{}), down: make(chan struct{})}
	stores := sharding.Stores{
		Shard:   func(i int) leaderelection.LeaseStore { return &cutLease{LeaseStore: shared.Shard(i), down: r.down} },
		Members: &cutMembers{MemberStore: shared.Members, down: r.down, lag: memberLag},
	}
	var logger *slog.Logger
	if os.Getenv("BATON_SHARDING_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("replica", id)
	}
	s, err := sharding.New(sharding.Config{
		Identity: id, Name: "ring", Namespace: "default", Shards: testShards,
		LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry,
	}, stores, sharding.Callbacks{
		OnAcquired: func(ctx context.Context) {
			st, ok := sharding.ShardTermFromContext(ctx)
			if !ok {
				t.Errorf("%s: OnAcquired's context carries no shard term", id)
				return
			}
			h.acquired(st, id)
			<-ctx.Done()
			h.lost(st, id)
		},
	}, logger)
	if err != nil {
		t.Fatal(err)
	}
	r.sharder = s
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		r.err = s.Run(ctx)
	}()
	return r
}

// stop ends Run (a graceful leave) and waits for it.
func (r *replica) stop() {
	r.cancel()
	<-r.done
}

// crash cuts the replica off from its stores: every call fails, every watch ends. Its
// terms end by their renew deadline; the others take its shards when its Leases
// expire.
func (r *replica) crash() { close(r.down) }

var errCrashed = errors.New("replica crashed")

type cutLease struct {
	leaderelection.LeaseStore
	down chan struct{}
}

func isDown(down chan struct{}) bool {
	select {
	case <-down:
		return true
	default:
		return false
	}
}

func (c *cutLease) Get(ctx context.Context) (leaderelection.LeaseRecord, error) {
	if isDown(c.down) {
		return leaderelection.LeaseRecord{}, errCrashed
	}
	return c.LeaseStore.Get(ctx)
}

func (c *cutLease) Create(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	if isDown(c.down) {
		return leaderelection.LeaseRecord{}, errCrashed
	}
	return c.LeaseStore.Create(ctx, r)
}

func (c *cutLease) Update(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	if isDown(c.down) {
		return leaderelection.LeaseRecord{}, errCrashed
	}
	return c.LeaseStore.Update(ctx, r)
}

// Watch relays the store's watch until the replica crashes.
func (c *cutLease) Watch(ctx context.Context) (<-chan leaderelection.LeaseEvent, error) {
	if isDown(c.down) {
		return nil, errCrashed
	}
	ctx, cancel := context.WithCancel(ctx)
	in, err := c.LeaseStore.Watch(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	out := make(chan leaderelection.LeaseEvent)
	go func() {
		defer close(out)
		defer func() {
			cancel()
			for range in {
			}
		}()
		for {
			select {
			case ev, ok := <-in:
				if !ok {
					return
				}
				select {
				case out <- ev:
				case <-c.down:
					return
				case <-ctx.Done():
					return
				}
			case <-c.down:
				return
			}
		}
	}()
	return out, nil
}

// cutMembers also delays every member event by lag, so that views of the members lag
// behind the shard Leases, as on a real API server where the watches race.
type cutMembers struct {
	sharding.MemberStore
	down chan struct{}
	lag  time.Duration
}

func (c *cutMembers) Renew(ctx context.Context, id string, d time.Duration) error {
	if isDown(c.down) {
		return errCrashed
	}
	return c.MemberStore.Renew(ctx, id, d)
}

func (c *cutMembers) Leave(ctx context.Context, id string) error {
	if isDown(c.down) {
		return errCrashed
	}
	return c.MemberStore.Leave(ctx, id)
}

func (c *cutMembers) Watch(ctx context.Context) (<-chan sharding.MemberEvent, error) {
	if isDown(c.down) {
		return nil, errCrashed
	}
	ctx, cancel := context.WithCancel(ctx)
	in, err := c.MemberStore.Watch(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	out := make(chan sharding.MemberEvent)
	go func() {
		defer close(out)
		defer func() {
			cancel()
			for range in {
			}
		}()
		for {
			select {
			case ev, ok := <-in:
				if !ok {
					return
				}
				time.Sleep(c.lag)
				select {
				case out <- ev:
				case <-c.down:
					return
				case <-ctx.Done():
					return
				}
			case <-c.down:
				return
			}
		}
	}()
	return out, nil
}

// history records every shard term as its OnAcquired saw it: from the call to the
// end of its context.
type history struct {
	mu     sync.Mutex
	open   map[int]map[string]time.Time // shard -> owner -> start
	terms  []shardTermSpan
	errors []string
}

type shardTermSpan struct {
	shard      int
	owner      string
	term       uint64
	start, end time.Time // end zero while open
}

func newHistory() *history { return &history{open: map[int]map[string]time.Time{}} }

func (h *history) acquired(st sharding.ShardTerm, id string) {
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
}

func (h *history) lost(st sharding.ShardTerm, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.open[st.Shard], id)
	for i := len(h.terms) - 1; i >= 0; i-- {
		if h.terms[i].shard == st.Shard && h.terms[i].owner == id && h.terms[i].end.IsZero() {
			h.terms[i].end = time.Now()
			return
		}
	}
}

// checkBalanced: every shard has exactly one owner, one of members, and their shares
// differ by at most one.
func (h *history) checkBalanced(t *testing.T, after string, members ...string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	count := map[string]int{}
	for shard := range testShards {
		var owners []string
		for o := range h.open[shard] {
			owners = append(owners, o)
		}
		if len(owners) != 1 || !slices.Contains(members, owners[0]) {
			t.Fatalf("after %s: shard %d owned by %v, want one of %v", after, shard, owners, members)
		}
		count[owners[0]]++
	}
	lo, hi := testShards, 0
	for _, m := range members {
		lo, hi = min(lo, count[m]), max(hi, count[m])
	}
	if hi-lo > 1 {
		t.Fatalf("after %s: shares %v, want within one shard", after, count)
	}
	t.Logf("after %s: shares %v", after, count)
}

// checkGaps: every shard whose term ended since from had its next term begin within
// limit.
func (h *history) checkGaps(t *testing.T, phase string, from time.Time, limit time.Duration) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	var worst, settled time.Duration
	moved := 0
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
		moved++
		worst = max(worst, next.Sub(ended.end))
		settled = max(settled, next.Sub(from))
	}
	if worst > limit {
		t.Fatalf("%s: a shard went %v without owner, want at most %v", phase, worst, limit)
	}
	t.Logf("%s: %d shards moved, longest without owner %v, last owned again %v after the fault", phase, moved, worst, settled)
}

// checkAllEnded: once every replica stopped, no term is open.
func (h *history) checkAllEnded(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.terms {
		if s.end.IsZero() {
			t.Errorf("shard %d: %s's term %d still open after every replica stopped", s.shard, s.owner, s.term)
		}
	}
}

// checkNoOverlap: no two terms of a shard overlapped, and no term began while another
// was open.
func (h *history) checkNoOverlap(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.errors {
		t.Error(e)
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
