package sharding_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/termctx"
	"github.com/baton-dev/baton/pkg/termrun"
)

// workLog records the runs of shard works, each start and end numbered in one
// sequence, so that "ended before it started" is exact in a bubble where time
// stands still.
type workLog struct {
	mu   sync.Mutex
	seq  int
	runs []*workRun
}

type workRun struct {
	replica, work string
	t             sharding.ShardTerm
	start, end    int // end 0 while running
	ctxTerm       sharding.ShardTerm
	ctxOK         bool
}

// work returns a Work named name of replica that records its runs and waits for its
// context to end.
func (l *workLog) work(replica, name string) sharding.Work {
	return sharding.Work{Name: name, Run: func(ctx context.Context, t sharding.ShardTerm) error {
		r := &workRun{replica: replica, work: name, t: t}
		r.ctxTerm, r.ctxOK = sharding.ShardTermOf(termctx.Get(ctx))
		l.mu.Lock()
		l.seq++
		r.start = l.seq
		l.runs = append(l.runs, r)
		l.mu.Unlock()
		<-ctx.Done()
		l.mu.Lock()
		l.seq++
		r.end = l.seq
		l.mu.Unlock()
		return ctx.Err()
	}}
}

func (l *workLog) snapshot() []workRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]workRun, len(l.runs))
	for i, r := range l.runs {
		out[i] = *r
	}
	return out
}

// running returns the shards on which replica runs work now.
func (l *workLog) running(replica, work string) map[int]bool {
	out := map[int]bool{}
	for _, r := range l.snapshot() {
		if r.replica == replica && r.work == work && r.end == 0 {
			out[r.t.Shard] = true
		}
	}
	return out
}

// workReplica is a Sharder running Workers on in-memory stores.
type workReplica struct {
	sharder *sharding.Sharder
	workers *sharding.Workers
	cancel  context.CancelFunc
	done    chan error
}

func startWorkReplica(t *testing.T, stores sharding.Stores, id string, config sharding.WorkConfig) *workReplica {
	t.Helper()
	w, err := sharding.NewWorkers(config)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sharding.NewWithStores(sharding.Config{
		Identity: id, Name: "ring", Namespace: "default", Shards: testShards,
		LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry,
	}, stores, sharding.Callbacks{OnAcquired: w.RunShard}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &workReplica{sharder: s, workers: w, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- s.Run(ctx) }()
	return r
}

func (r *workReplica) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := <-r.done; err != nil {
		t.Errorf("Run: %v", err)
	}
	r.done <- nil // a second stop returns at once
}

// TestWorkersFollowShardTerms: a replica alone runs each work on every shard, under
// the shard's term context; a second replica joins and takes half the shards, each
// work of a moved shard ending on the first replica before it starts on the second;
// the replicas leave and every work ended.
func TestWorkersFollowShardTerms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stores := sharding.NewMemoryStores(testShards)
		log := &workLog{}
		config := func(id string) sharding.WorkConfig {
			return sharding.WorkConfig{Works: []sharding.Work{log.work(id, "x"), log.work(id, "y")}}
		}
		a := startWorkReplica(t, stores, "a", config("a"))
		defer a.stop(t)
		time.Sleep(5 * time.Second)
		for _, work := range []string{"x", "y"} {
			if got := len(log.running("a", work)); got != testShards {
				t.Fatalf("a alone runs work %s on %d shards, want %d", work, got, testShards)
			}
		}
		if st := a.workers.Stats(); st.Running != 2*testShards || st.Started != 2*testShards || st.Failed != 0 {
			t.Errorf("a's stats %+v, want %d running and started, none failed", st, 2*testShards)
		}

		b := startWorkReplica(t, stores, "b", config("b"))
		defer b.stop(t)
		time.Sleep(5 * time.Second)
		ax, bx := log.running("a", "x"), log.running("b", "x")
		if len(ax)+len(bx) != testShards || len(ax) != testShards/2 {
			t.Fatalf("after b joined: a runs x on %d shards, b on %d; want %d each", len(ax), len(bx), testShards/2)
		}
		for shard := range bx {
			if ax[shard] {
				t.Errorf("shard %d: x runs on a and b", shard)
			}
		}
		a.stop(t)
		b.stop(t)

		runs := log.snapshot()
		for _, r := range runs {
			if r.end == 0 {
				t.Errorf("%s's work %s of %v still running after Run returned", r.replica, r.work, r.t)
			}
			if !r.ctxOK || r.ctxTerm != r.t {
				t.Errorf("%s's work %s of %v: its context carries %v (ok %v)", r.replica, r.work, r.t, r.ctxTerm, r.ctxOK)
			}
		}
		// A shard's runs of one work never overlap, and a later term starts after the
		// earlier one's work ended.
		for i, r := range runs {
			for _, q := range runs[i+1:] {
				if r.t.Shard == q.t.Shard && r.work == q.work && r.start < q.end && q.start < r.end {
					t.Errorf("work %s of shard %d ran on %s (%v) and %s (%v) at once", r.work, r.t.Shard, r.replica, r.t, q.replica, q.t)
				}
			}
		}
		for _, w := range []*sharding.Workers{a.workers, b.workers} {
			if st := w.Stats(); st.Running != 0 || st.Failed != 0 {
				t.Errorf("stats after leaving: %+v, want none running, none failed", st)
			}
		}
	})
}

// TestWorkersIsolateFailures: on one replica, a work panics on shard 0 and returns an
// error on shard 1, once each; the work of every other shard and the other work of
// shards 0 and 1 keep running; the failed ones run again RestartDelay later, in the
// same term.
func TestWorkersIsolateFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 3 * time.Second
		stores := sharding.NewMemoryStores(testShards)
		log := &workLog{}
		var mu sync.Mutex
		runs := map[int]int{}
		restartedAt := map[int]time.Time{}
		var failedAt time.Time
		flaky := sharding.Work{Name: "flaky", Run: func(ctx context.Context, st sharding.ShardTerm) error {
			mu.Lock()
			runs[st.Shard]++
			first := runs[st.Shard] == 1
			if !first {
				restartedAt[st.Shard] = time.Now()
			} else if st.Shard < 2 {
				failedAt = time.Now()
			}
			mu.Unlock()
			if first && st.Shard < 2 {
				if st.Shard == 0 {
					panic("boom")
				}
				return errors.New("transient")
			}
			<-ctx.Done()
			return ctx.Err()
		}}
		a := startWorkReplica(t, stores, "a", sharding.WorkConfig{
			Works: []sharding.Work{flaky, log.work("a", "steady")}, RestartDelay: delay,
		})
		defer a.stop(t)
		time.Sleep(delay / 2)
		if st := a.workers.Stats(); st.Failed != 2 || st.Panicked != 1 || st.Running != 2*testShards-2 {
			t.Fatalf("after the failures: %+v, want 2 failed, 1 panicked, %d running", st, 2*testShards-2)
		}
		if got := len(log.running("a", "steady")); got != testShards {
			t.Errorf("the steady work runs on %d shards, want %d", got, testShards)
		}
		time.Sleep(delay)
		mu.Lock()
		for shard := range 2 {
			if runs[shard] != 2 || !restartedAt[shard].Equal(failedAt.Add(delay)) {
				t.Errorf("shard %d: %d runs, restarted at +%v; want 2, at +%v", shard, runs[shard], restartedAt[shard].Sub(failedAt), delay)
			}
		}
		for shard := 2; shard < testShards; shard++ {
			if runs[shard] != 1 {
				t.Errorf("shard %d: flaky ran %d times, want once", shard, runs[shard])
			}
		}
		mu.Unlock()
		if st := a.workers.Stats(); st.Running != 2*testShards || st.Started != 2*testShards+2 {
			t.Errorf("after the restarts: %+v, want %d running, %d started", st, 2*testShards, 2*testShards+2)
		}
		if ws := a.workers.StatsByWork(); ws["flaky"].Failed != 2 || ws["flaky"].Started != testShards+2 || ws["steady"].Failed != 0 {
			t.Errorf("stats by work %+v, want flaky's 2 failures and restarts, none of steady", ws)
		}
		a.stop(t)
		if st := a.workers.Stats(); st.Running != 0 || st.Failed != 2 {
			t.Errorf("after leaving: %+v, want none running, still 2 failed", st)
		}
	})
}

// TestWorkersCountAnErrorAtTheEndOfATerm: a work that returns its context's error
// once the term ended is not a failure; one that returns another error is.
func TestWorkersCountAnErrorAtTheEndOfATerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stores := sharding.NewMemoryStores(testShards)
		a := startWorkReplica(t, stores, "a", sharding.WorkConfig{Works: []sharding.Work{
			{Name: "clean", Run: func(ctx context.Context, _ sharding.ShardTerm) error {
				<-ctx.Done()
				return fmt.Errorf("stopping: %w", ctx.Err())
			}},
			{Name: "dirty", Run: func(ctx context.Context, _ sharding.ShardTerm) error {
				<-ctx.Done()
				return errors.New("flush failed")
			}},
		}})
		time.Sleep(5 * time.Second)
		a.stop(t)
		if st := a.workers.Stats(); st.Failed != testShards || st.Running != 0 {
			t.Errorf("stats %+v, want %d failed (the dirty work of every shard), none running", st, testShards)
		}
	})
}

// TestWorkersWithoutShardTerm: RunShard given a context of no shard term runs nothing
// and returns.
func TestWorkersWithoutShardTerm(t *testing.T) {
	ran := false
	w, err := sharding.NewWorkers(sharding.WorkConfig{Works: []sharding.Work{{Name: "w", Run: func(context.Context, sharding.ShardTerm) error {
		ran = true
		return nil
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	w.RunShard(context.Background())
	if ran || w.Stats().Started != 0 {
		t.Errorf("work ran without a shard term")
	}
}

// TestNewWorkersRefusesBadConfig: each bad field is named.
func TestNewWorkersRefusesBadConfig(t *testing.T) {
	run := func(context.Context, sharding.ShardTerm) error { return nil }
	for _, tc := range []struct {
		name   string
		config sharding.WorkConfig
		want   []string
	}{
		{"no works", sharding.WorkConfig{}, []string{"Works: empty"}},
		{"unnamed", sharding.WorkConfig{Works: []sharding.Work{{Run: run}}}, []string{"Works[0].Name: empty"}},
		{"twice", sharding.WorkConfig{Works: []sharding.Work{{Name: "a", Run: run}, {Name: "a", Run: run}}}, []string{`Works[1].Name: "a" twice`}},
		{"no run", sharding.WorkConfig{Works: []sharding.Work{{Name: "a"}}}, []string{"Works[0].Run: nil"}},
		{"negative delay", sharding.WorkConfig{Works: []sharding.Work{{Name: "a", Run: run}}, RestartDelay: -time.Second}, []string{"RestartDelay: -1s is negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sharding.NewWorkers(tc.config)
			if !errors.Is(err, sharding.ErrInvalidConfig) {
				t.Fatalf("error %v, want one wrapping ErrInvalidConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// recordingHandler keeps the messages of the records it handles.
type recordingHandler struct {
	mu       sync.Mutex
	messages []string
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	h.messages = append(h.messages, msg)
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) count(substr string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.messages {
		if strings.Contains(m, substr) {
			n++
		}
	}
	return n
}

// TestWorkersWarnOfAnOverstayingWork: a work of shard 0 that returns 15s after its
// term ended is logged once, OverstayWarning after the end, and holds the replica's
// leave until it returns; the works that return at once are not logged.
func TestWorkersWarnOfAnOverstayingWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lag = 15 * time.Second
		logs := &recordingHandler{}
		stores := sharding.NewMemoryStores(testShards)
		a := startWorkReplica(t, stores, "a", sharding.WorkConfig{Logger: slog.New(logs), Works: []sharding.Work{
			{Name: "slow", Run: func(ctx context.Context, st sharding.ShardTerm) error {
				<-ctx.Done()
				if st.Shard == 0 {
					time.Sleep(lag)
				}
				return nil
			}},
		}})
		time.Sleep(5 * time.Second)
		leave := time.Now()
		go a.cancel()
		const warning = "work has not returned since its term ended" // termrun's wording
		time.Sleep(sharding.OverstayWarning - time.Millisecond)
		if n := logs.count(warning); n != 0 {
			t.Fatalf("%d warnings before OverstayWarning passed", n)
		}
		time.Sleep(2 * time.Millisecond)
		if n, m := logs.count(warning), logs.count("work=slow shard=0 "); n != 1 || m != 1 {
			t.Fatalf("%d warnings, %d of shard 0, once OverstayWarning passed; want 1 of shard 0: %v", n, m, logs.messages)
		}
		if err := <-a.done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if took := time.Since(leave); took < lag {
			t.Errorf("the leave took %v, less than the overstaying work (%v)", took, lag)
		}
		if n := logs.count(warning); n != 1 {
			t.Errorf("%d warnings in all, want 1", n)
		}
		a.done <- nil
	})
}

// TestWorkersGiveUpAShardOfACrashLoopingWork: a work that fails at once on shard 0
// of a replica alone is restarted until it has failed for StepDownGrace in a row;
// then Sharder.ResignShard ends that shard's term, once per term, and the shard is
// led again in a later term; the other shards keep their term.
func TestWorkersGiveUpAShardOfACrashLoopingWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const grace = 5 * time.Second
		stores := sharding.NewMemoryStores(testShards)
		var (
			mu      sync.Mutex
			sharder *sharding.Sharder
			given   []sharding.ShardTerm
			reasons []error
		)
		config := sharding.WorkConfig{StepDownGrace: grace, Works: []sharding.Work{{Name: "crashy", Run: func(ctx context.Context, st sharding.ShardTerm) error {
			if st.Shard == 0 {
				return errors.New("always")
			}
			<-ctx.Done()
			return ctx.Err()
		}}}, StepDown: func(st sharding.ShardTerm, reason error) bool {
			mu.Lock()
			given, reasons = append(given, st), append(reasons, reason)
			s := sharder
			mu.Unlock()
			return s.ResignShard(st)
		}}
		a := startWorkReplica(t, stores, "a", config)
		defer a.stop(t)
		mu.Lock()
		sharder = a.sharder
		mu.Unlock()
		time.Sleep(2 * time.Second)
		before := a.sharder.Owned()
		if len(before) != testShards {
			t.Fatalf("a alone owns %v", before)
		}
		time.Sleep(grace)
		synctest.Wait()
		mu.Lock()
		if len(given) != 1 || given[0] != before[0] || !errors.Is(reasons[0], termrun.ErrFailing) {
			t.Errorf("terms given up %v (%v), want shard 0's %v once", given, reasons, before[0])
		}
		mu.Unlock()
		// The shard is led again, after the resignation's hold-off, in a later term,
		// which the work's crash loop gives up in turn.
		time.Sleep(grace + 3*testLease)
		synctest.Wait()
		mu.Lock()
		if len(given) < 2 {
			t.Errorf("terms given up %v, want shard 0's in a later term too", given)
		}
		for i := 1; i < len(given); i++ {
			if given[i].Shard != 0 || given[i].Term <= given[i-1].Term {
				t.Errorf("terms given up %v, want shard 0's, each term once", given)
			}
		}
		n := uint64(len(given))
		mu.Unlock()
		after := a.sharder.Owned()
		for _, st := range after {
			if st.Shard != 0 && st != before[st.Shard] {
				t.Errorf("shard %d moved from %v to %v", st.Shard, before[st.Shard], st)
			}
		}
		if len(after) < testShards-1 {
			t.Errorf("a owns %v", after)
		}
		if st := a.workers.Stats(); st.StepDowns != n {
			t.Errorf("stats %+v, want %d step-downs counted", st, n)
		}
	})
}
