package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/termctx"
)

// errInjected is what a testStore in modeFail returns.
var errInjected = errors.New("injected store failure")

// storeMode is how a testStore treats calls.
type storeMode int

const (
	modePass  storeMode = iota // forward to the inner store, after the latency
	modeFail                   // fail at once with errInjected
	modeHang                   // block until the call's ctx ends (a black-holed network)
	modeStuck                  // block, ignoring ctx, until the mode changes (a stuck call)
)

// testStore wraps one candidate's view of a shared store: it counts calls, adds a
// latency, injects faults, and records the times of writes. Changing the mode away
// from modePass breaks the open watches.
type testStore struct {
	inner   LeaseStore
	latency time.Duration

	mu          sync.Mutex
	mode        storeMode
	changed     chan struct{} // closed and replaced on every mode change
	watches     map[*int]context.CancelFunc
	calls       map[string]int
	watchTimes  []time.Time
	renewSent   time.Time // send time of the last successful Update holding the lease
	renewDone   time.Time // completion time of it
	releaseDone time.Time // completion time of the last successful Update releasing it
	// beforeUpdate, if set, runs (once) just before an Update reaches the inner store.
	beforeUpdate func()
	// beforeCreate, if set, runs (once) just before a Create reaches the inner store (a
	// request held on the way, e.g. by a paused process).
	beforeCreate func()
	// afterCreate, if set, runs (once) after a Create the inner store applied, before
	// its reply returns (a slow reply).
	afterCreate func()
	// silent makes new watches deliver their first event only, then nothing, without
	// closing (a stalled connection).
	silent bool
	// buffered makes new watches relay every event into a buffer of watchBuffer, as a
	// Kubernetes client's watch does, instead of the MemoryStore's buffer of one, which
	// skips to the latest state.
	buffered bool
	// loseReplies is how many of the next successful Updates answer with
	// errInjected although the store applied them (a reply lost on the way back).
	loseReplies int
	// loseCreateReply makes the next Create the store applies answer with errInjected
	// (a reply lost on the way back).
	loseCreateReply bool
	// failWatches makes every new watch fail with errInjected while the other calls
	// pass (setWatchesFail).
	failWatches bool
}

func newTestStore(inner LeaseStore, latency time.Duration) *testStore {
	return &testStore{
		inner:   inner,
		latency: latency,
		changed: make(chan struct{}),
		watches: make(map[*int]context.CancelFunc),
		calls:   make(map[string]int),
	}
}

func (s *testStore) String() string { return "test/" + s.inner.String() }

func (s *testStore) setMode(m storeMode) {
	s.mu.Lock()
	s.mode = m
	close(s.changed)
	s.changed = make(chan struct{})
	var cancels []context.CancelFunc
	if m != modePass {
		for k, cancel := range s.watches {
			cancels = append(cancels, cancel)
			delete(s.watches, k)
		}
	}
	s.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
}

// breakWatches closes the open watches, as a server ending them would.
func (s *testStore) breakWatches() {
	s.mu.Lock()
	var cancels []context.CancelFunc
	for k, cancel := range s.watches {
		cancels = append(cancels, cancel)
		delete(s.watches, k)
	}
	s.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
}

func (s *testStore) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[name]
}

func (s *testStore) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

func (s *testStore) times() (renewSent, renewDone, releaseDone time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renewSent, s.renewDone, s.releaseDone
}

// enter counts a call and applies the mode and latency.
func (s *testStore) enter(ctx context.Context, name string) error {
	for {
		s.mu.Lock()
		s.calls[name]++
		if name == "Watch" {
			s.watchTimes = append(s.watchTimes, time.Now())
		}
		mode, changed := s.mode, s.changed
		s.mu.Unlock()
		switch mode {
		case modeFail:
			return errInjected
		case modeHang:
			<-ctx.Done()
			return ctx.Err()
		case modeStuck:
			<-changed
			s.mu.Lock()
			s.calls[name]-- // counted again on the next round
			s.mu.Unlock()
			continue
		}
		if s.latency > 0 {
			select {
			case <-time.After(s.latency):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
}

func (s *testStore) Get(ctx context.Context) (LeaseRecord, error) {
	if err := s.enter(ctx, "Get"); err != nil {
		return LeaseRecord{}, err
	}
	return s.inner.Get(ctx)
}

func (s *testStore) Create(ctx context.Context, r LeaseRecord) (LeaseRecord, error) {
	sent := time.Now()
	if err := s.enter(ctx, "Create"); err != nil {
		return LeaseRecord{}, err
	}
	s.mu.Lock()
	before := s.beforeCreate
	s.beforeCreate = nil
	s.mu.Unlock()
	if before != nil {
		before()
	}
	out, err := s.inner.Create(ctx, r)
	if err == nil {
		s.mu.Lock()
		s.renewSent, s.renewDone = sent, time.Now()
		hook := s.afterCreate
		s.afterCreate = nil
		lose := s.loseCreateReply
		s.loseCreateReply = false
		s.mu.Unlock()
		if hook != nil {
			hook()
		}
		if lose {
			return LeaseRecord{}, errInjected
		}
	}
	return out, err
}

func (s *testStore) Update(ctx context.Context, r LeaseRecord) (LeaseRecord, error) {
	sent := time.Now()
	if err := s.enter(ctx, "Update"); err != nil {
		return LeaseRecord{}, err
	}
	s.mu.Lock()
	hook := s.beforeUpdate
	s.beforeUpdate = nil
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
	out, err := s.inner.Update(ctx, r)
	if err == nil {
		s.mu.Lock()
		if r.HolderIdentity == "" {
			s.releaseDone = time.Now()
		} else {
			s.renewSent, s.renewDone = sent, time.Now()
		}
		lose := s.loseReplies > 0
		if lose {
			s.loseReplies--
		}
		s.mu.Unlock()
		if lose {
			return LeaseRecord{}, errInjected
		}
	}
	return out, err
}

// setWatchesFail makes new watches fail (fail true) and breaks the open ones, or lets
// watches open again (fail false).
func (s *testStore) setWatchesFail(fail bool) {
	s.mu.Lock()
	s.failWatches = fail
	s.mu.Unlock()
	if fail {
		s.breakWatches()
	}
}

func (s *testStore) Watch(ctx context.Context) (<-chan LeaseEvent, error) {
	if err := s.enter(ctx, "Watch"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	fail := s.failWatches
	s.mu.Unlock()
	if fail {
		return nil, errInjected
	}
	wctx, cancel := context.WithCancel(ctx)
	key := new(int)
	s.mu.Lock()
	if s.mode != modePass {
		// The mode changed since enter let this call through, and setMode found no
		// watch of it to cancel: obey the new mode, counted once.
		s.calls["Watch"]--
		s.watchTimes = s.watchTimes[:len(s.watchTimes)-1]
		s.mu.Unlock()
		cancel()
		return s.Watch(ctx)
	}
	s.watches[key] = cancel
	s.mu.Unlock()
	events, err := s.inner.Watch(wctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s.mu.Lock()
	silent, buffered := s.silent, s.buffered
	s.mu.Unlock()
	if buffered {
		out := make(chan LeaseEvent, watchBuffer)
		go func() {
			defer close(out)
			for ev := range events {
				out <- ev
			}
		}()
		return out, nil
	}
	if !silent {
		return events, nil
	}
	out := make(chan LeaseEvent, 1)
	out <- <-events
	go func() {
		defer close(out)
		for range events { // swallowed until the store closes it
		}
	}()
	return out, nil
}

// cluster runs candidates on one MemoryStore and checks, at every start of a term and
// every 10ms, that no two of them believe they lead, that terms strictly increase, and
// that OnStoppedLeading runs once per term, after its context ended.
type cluster struct {
	t      *testing.T
	mem    *MemoryStore
	ctx    context.Context
	cancel context.CancelFunc
	poller sync.WaitGroup

	mu       sync.Mutex
	cands    []*candidate
	active   string // candidate whose OnStartedLeading has not seen its ctx end
	lastTerm uint64
	// termsMayRepeat turns off the check that terms increase across candidates, for
	// histories rewound below terms that some candidate never saw.
	termsMayRepeat bool
	// overlapOK turns two leaders at once from a failure into a count (overlaps), for
	// tests that show a fault beyond what the elector tolerates.
	overlapOK bool
	overlaps  int
	// logTo, when set before a start, receives the logs of the candidates started
	// from then on (text, Info and up); it must be safe for concurrent use.
	logTo io.Writer
}

type candidate struct {
	id     string
	e      *Elector
	store  *testStore
	cl     *cluster
	cancel context.CancelFunc
	done   chan struct{} // closed when Start returned

	mu         sync.Mutex
	startErr   error
	terms      []uint64
	termCtxs   []context.Context
	startedAt  []time.Time
	endedAt    []time.Time // when OnStartedLeading saw its ctx end
	stopped    int
	newLeaders []string
}

// testConfig is the configuration of cluster candidates: the defaults.
func testConfig(id string) Config {
	return Config{Identity: id, LeaseName: "lease", LeaseNamespace: "default"}
}

func newCluster(t *testing.T) *cluster {
	ctx, cancel := context.WithCancel(context.Background())
	cl := &cluster{t: t, mem: NewMemoryStore("lease"), ctx: ctx, cancel: cancel}
	cl.poller.Go(cl.poll)
	return cl
}

// poll checks every 10ms that at most one candidate believes it leads.
func (cl *cluster) poll() {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-cl.ctx.Done():
			return
		case <-tick.C:
		}
		cl.mu.Lock()
		var leaders []string
		for _, c := range cl.cands {
			if c.e.IsLeader() {
				leaders = append(leaders, fmt.Sprintf("%s(term %d)", c.id, c.e.Term()))
			}
		}
		ok := cl.overlapOK
		if ok && len(leaders) > 1 {
			cl.overlaps++
		}
		cl.mu.Unlock()
		if len(leaders) > 1 && !ok {
			cl.t.Errorf("%v: more than one leader: %v", time.Now().Format(time.StampMilli), leaders)
		}
	}
}

// start starts a candidate whose config is testConfig(id) changed by edit.
func (cl *cluster) start(id string, edit func(*Config)) *candidate {
	cl.t.Helper()
	return cl.startWith(id, edit, nil)
}

// startWith is start with the candidate's store set up by prepare before Start.
func (cl *cluster) startWith(id string, edit func(*Config), prepare func(*testStore)) *candidate {
	cl.t.Helper()
	return cl.startWrapped(id, edit, prepare, nil)
}

// startWrapped is startWith with the elector reaching the candidate's testStore through
// wrap(testStore) when wrap is not nil.
func (cl *cluster) startWrapped(id string, edit func(*Config), prepare func(*testStore), wrap func(LeaseStore) LeaseStore) *candidate {
	cl.t.Helper()
	cfg := testConfig(id)
	if edit != nil {
		edit(&cfg)
	}
	c := &candidate{id: id, cl: cl, store: newTestStore(cl.mem, time.Millisecond), done: make(chan struct{})}
	if prepare != nil {
		prepare(c.store)
	}
	var store LeaseStore = c.store
	if wrap != nil {
		store = wrap(c.store)
	}
	e, err := NewWithStore(cfg, store, Callbacks{
		OnStartedLeading: c.lead,
		OnStoppedLeading: c.stop,
		OnNewLeader: func(identity string) {
			c.mu.Lock()
			c.newLeaders = append(c.newLeaders, identity)
			c.mu.Unlock()
		},
	}, cl.logger())
	if err != nil {
		cl.t.Fatalf("NewWithStore(%s): %v", id, err)
	}
	c.e = e
	cl.mu.Lock()
	cl.cands = append(cl.cands, c)
	cl.mu.Unlock()
	ctx, cancel := context.WithCancel(cl.ctx)
	c.cancel = cancel
	go func() {
		defer close(c.done)
		err := e.Start(ctx)
		c.mu.Lock()
		c.startErr = err
		c.mu.Unlock()
	}()
	return c
}

func (c *candidate) lead(ctx context.Context) {
	cl := c.cl
	term, ok := termctx.FromContext(ctx)
	if !ok || term == 0 {
		cl.t.Errorf("%s: termctx.FromContext = %d, %v", c.id, term, ok)
	}
	if got := c.e.Term(); got != term && ctx.Err() == nil { // a term may end before its work starts
		cl.t.Errorf("%s: Term() = %d in OnStartedLeading of term %d", c.id, got, term)
	}
	cl.mu.Lock()
	for _, o := range cl.cands {
		if o != c && o.e.IsLeader() && !cl.overlapOK {
			cl.t.Errorf("%s starts term %d while %s leads term %d", c.id, term, o.id, o.e.Term())
		}
	}
	if cl.active != "" && !cl.overlapOK {
		cl.t.Errorf("%s starts term %d while the work of %s's term %d still runs", c.id, term, cl.active, cl.lastTerm)
	}
	if term <= cl.lastTerm && !cl.termsMayRepeat {
		cl.t.Errorf("%s: term %d not above the previous term %d", c.id, term, cl.lastTerm)
	}
	cl.active, cl.lastTerm = c.id, term
	cl.mu.Unlock()
	c.mu.Lock()
	c.terms = append(c.terms, term)
	c.termCtxs = append(c.termCtxs, ctx)
	c.startedAt = append(c.startedAt, time.Now())
	c.mu.Unlock()

	<-ctx.Done()

	cl.mu.Lock()
	cl.active = ""
	cl.mu.Unlock()
	c.mu.Lock()
	c.endedAt = append(c.endedAt, time.Now())
	c.mu.Unlock()
}

func (c *candidate) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped++
	if c.stopped > len(c.termCtxs) {
		// OnStoppedLeading may run before the OnStartedLeading goroutine; the term
		// count is checked at the end.
		return
	}
	if ctx := c.termCtxs[c.stopped-1]; ctx.Err() == nil {
		c.cl.t.Errorf("%s: OnStoppedLeading before the term context ended", c.id)
	}
}

// snapshot returns copies of the candidate's records.
func (c *candidate) snapshot() (terms []uint64, started, ended []time.Time, stopped int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint64(nil), c.terms...), append([]time.Time(nil), c.startedAt...),
		append([]time.Time(nil), c.endedAt...), c.stopped
}

func (c *candidate) lastCtx() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.termCtxs) == 0 {
		return nil
	}
	return c.termCtxs[len(c.termCtxs)-1]
}

// shutdown stops the candidate and waits for Start to return.
func (c *candidate) shutdown() error {
	c.cancel()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped != len(c.terms) {
		c.cl.t.Errorf("%s: %d terms started, OnStoppedLeading ran %d times", c.id, len(c.terms), c.stopped)
	}
	return c.startErr
}

// leader returns the candidate that believes it leads, or nil.
func (cl *cluster) leader() *candidate {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var found *candidate
	for _, c := range cl.cands {
		if c.e.IsLeader() {
			if found != nil {
				cl.t.Errorf("both %s and %s lead", found.id, c.id)
			}
			found = c
		}
	}
	return found
}

// waitLeader sleeps (fake time) until some candidate other than not leads, at most max.
func (cl *cluster) waitLeader(not *candidate, max time.Duration) *candidate {
	cl.t.Helper()
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		if l := cl.leader(); l != nil && l != not {
			synctest.Wait() // let its OnStartedLeading record the term
			return l
		}
		time.Sleep(time.Millisecond)
	}
	cl.t.Fatalf("no new leader within %v", max)
	return nil
}

// stop shuts all candidates down and the poller.
func (cl *cluster) stop() {
	cl.mu.Lock()
	cands := append([]*candidate(nil), cl.cands...)
	cl.mu.Unlock()
	for _, c := range cands {
		if err := c.shutdown(); err != nil {
			cl.t.Errorf("%s: Start returned %v", c.id, err)
		}
	}
	cl.cancel()
	cl.poller.Wait()
}

// logger is the logger of a candidate started now: to logTo when set, else testLogger's.
func (cl *cluster) logger() *slog.Logger {
	cl.mu.Lock()
	w := cl.logTo
	cl.mu.Unlock()
	if w == nil {
		return testLogger(cl.t)
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// testLogger logs to t with -v and LEADERELECTION_TEST_LOG set, and discards otherwise.
func testLogger(t *testing.T) *slog.Logger {
	if !testing.Verbose() || os.Getenv("LEADERELECTION_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

var _ io.Writer = tWriter{}
