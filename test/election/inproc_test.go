package election

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clientgoelection "k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/termctx"
)

const namespace = "default"

// harness is the per-test state: the API server, the safety monitor and its
// sampler. Its cleanup stops the sampler and checks the monitor after every
// candidate of the test has stopped (cleanups run last-registered first).
type harness struct {
	t   testing.TB
	env *batontest.Env
	m   *monitor
	s   *sampler
}

func newHarness(t testing.TB, env *batontest.Env) *harness {
	m := newMonitor()
	h := &harness{t: t, env: env, m: m, s: startSampler(m)}
	t.Cleanup(func() {
		h.s.stop()
		if len(h.m.snapshot()) == 0 {
			t.Error("safety: the monitor observed no leadership at all")
		}
		h.m.check(t)
	})
	return h
}

var leaseSeq atomic.Int64

// leaseName returns a Lease name of its own for the test.
func leaseName(t testing.TB) string {
	n := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	if len(n) > 40 {
		n = n[:40]
	}
	return fmt.Sprintf("%s-%d", strings.Trim(n, "-"), leaseSeq.Add(1))
}

// termRecord is one term of an in-process Baton candidate, from its callbacks.
type termRecord struct {
	term    uint64
	ctx     context.Context
	started mtime // OnStartedLeading entry
	ended   mtime // when the term context ended, 0 before
	cause   error
}

// batonCandidate is an in-process Baton elector under test.
type batonCandidate struct {
	who    string
	el     *leaderelection.Elector
	log    *requestLog
	m      *monitor
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Start's result, set before done is closed

	// sampledTerm is the term the sampler last saw led; sampler goroutine only.
	sampledTerm uint64

	// mu guards the fields below.
	mu         sync.Mutex
	terms      []*termRecord
	newLeaders []string
	stops      int
}

type candidateOptions struct {
	timings timings
	release bool
	// cfg overrides the harness's REST config (for a client with another transport).
	cfg *rest.Config
	// log receives the candidate's requests; a new one when nil.
	log *requestLog
}

// baton starts a Baton candidate on lease; it is stopped (and its Start result
// checked) when the test ends, or by stop.
func (h *harness) baton(who, lease string, o candidateOptions) *batonCandidate {
	t := h.t
	t.Helper()
	if o.log == nil {
		o.log = &requestLog{}
	}
	cfg := o.cfg
	if cfg == nil {
		cfg = h.env.Config()
	}
	c := &batonCandidate{who: who, log: o.log, m: h.m, done: make(chan struct{})}
	el, err := leaderelection.New(leaderelection.Config{
		Identity:        who,
		LeaseName:       lease,
		LeaseNamespace:  namespace,
		LeaseDuration:   o.timings.lease,
		RenewDeadline:   o.timings.renew,
		RetryPeriod:     o.timings.retry,
		ReleaseOnCancel: o.release,
	}, loggedClientset(t, cfg, o.log), leaderelection.Callbacks{
		OnStartedLeading: c.onStarted,
		OnStoppedLeading: c.onStopped,
		OnNewLeader:      c.onNewLeader,
	}, testLogger(t, who))
	if err != nil {
		t.Fatalf("leaderelection.New(%s): %v", who, err)
	}
	c.el = el
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		c.err = el.Start(ctx)
	}()
	h.s.add(c)
	t.Cleanup(func() { c.stop(t) })
	return c
}

func (c *batonCandidate) onStarted(ctx context.Context) {
	b := now()
	term, ok := termctx.FromContext(ctx)
	alive := ctx.Err() == nil
	a := now()
	if !ok || term == 0 {
		c.m.problem("%s: OnStartedLeading context carries no term", c.who)
	}
	rec := &termRecord{term: term, ctx: ctx, started: a}
	c.mu.Lock()
	c.terms = append(c.terms, rec)
	c.mu.Unlock()
	if alive {
		c.m.leading(c.who, episodeOfTerm(term), term, b, a)
	}
	<-ctx.Done() // leader work runs until the term ends
	at := now()
	c.m.ended(c.who, episodeOfTerm(term), at)
	c.mu.Lock()
	rec.ended, rec.cause = at, context.Cause(ctx)
	c.mu.Unlock()
}

func (c *batonCandidate) onStopped() {
	c.mu.Lock()
	c.stops++
	var live []uint64
	for _, r := range c.terms {
		if r.ctx.Err() == nil {
			live = append(live, r.term)
		}
	}
	c.mu.Unlock()
	if len(live) > 0 {
		c.m.problem("%s: OnStoppedLeading ran while the context of term(s) %v was still live", c.who, live)
	}
}

func (c *batonCandidate) onNewLeader(id string) {
	if id == "" {
		c.m.problem("%s: OnNewLeader(\"\")", c.who)
	}
	c.mu.Lock()
	c.newLeaders = append(c.newLeaders, id)
	c.mu.Unlock()
}

func (c *batonCandidate) termCtx(term uint64) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.terms {
		if r.term == term {
			return r.ctx
		}
	}
	return nil
}

// sample observes IsLeader and Term around a read of the term context: IsLeader
// true after the term context was seen ended is a violation of the term contract.
func (c *batonCandidate) sample(m *monitor) {
	b := now()
	t1 := c.el.Term()
	var ctxEnded bool
	if ctx := c.termCtx(t1); t1 != 0 && ctx != nil {
		ctxEnded = ctx.Err() != nil
	}
	lead := c.el.IsLeader()
	t2 := c.el.Term()
	a := now()
	switch {
	case lead && t1 == t2 && t1 != 0:
		if ctxEnded {
			m.problem("%s: IsLeader true for term %d after its term context ended", c.who, t1)
		}
		m.leading(c.who, episodeOfTerm(t1), t1, b, a)
		c.sampledTerm = t1
	case lead && t1 == 0 && t2 == 0:
		m.problem("%s: IsLeader true while Term is 0", c.who)
	case !lead && c.sampledTerm != 0:
		m.ended(c.who, episodeOfTerm(c.sampledTerm), a)
		c.sampledTerm = 0
	}
}

// stop cancels the candidate and waits for Start to return; it checks Start's
// result and the callback contract. Safe to call more than once.
func (c *batonCandidate) stop(t testing.TB) {
	t.Helper()
	c.cancel()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Errorf("%s: Start did not return within 30s of cancel", c.who)
		return
	}
	if c.err != nil {
		t.Errorf("%s: Start returned %v", c.who, c.err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stops != len(c.terms) {
		t.Errorf("%s: OnStoppedLeading ran %d times for %d started terms", c.who, c.stops, len(c.terms))
	}
	if c.el.IsLeader() || c.el.Term() != 0 {
		t.Errorf("%s: IsLeader %v Term %d after Start returned", c.who, c.el.IsLeader(), c.el.Term())
	}
}

// started returns the terms started so far.
func (c *batonCandidate) started() []termRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]termRecord, len(c.terms))
	for i, r := range c.terms {
		out[i] = *r
	}
	return out
}

func (c *batonCandidate) lastTerm() (termRecord, bool) {
	s := c.started()
	if len(s) == 0 {
		return termRecord{}, false
	}
	return s[len(s)-1], true
}

func (c *batonCandidate) sawLeader(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.newLeaders {
		if l == id {
			return true
		}
	}
	return false
}

// runRecord is one leadership of an in-process client-go candidate: one Run of
// its LeaderElector that acquired the lease.
type runRecord struct {
	episode string
	ctx     context.Context
	started mtime
	ended   mtime
}

// clientGoCandidate is client-go's stock elector (resourcelock.LeaseLock) run
// in a loop, since its Run returns when it loses the lease.
type clientGoCandidate struct {
	who    string
	log    *requestLog
	m      *monitor
	cancel context.CancelFunc
	done   chan struct{}

	// le is the LeaderElector of the current Run.
	le atomic.Pointer[clientgoelection.LeaderElector]

	// sampled is the episode the sampler last saw led; sampler goroutine only.
	sampled string

	// mu guards the fields below.
	mu         sync.Mutex
	runs       []*runRecord
	newLeaders []string
}

func (h *harness) clientGo(who, lease string, o candidateOptions) *clientGoCandidate {
	t := h.t
	t.Helper()
	if o.log == nil {
		o.log = &requestLog{}
	}
	cfg := o.cfg
	if cfg == nil {
		cfg = h.env.Config()
	}
	c := &clientGoCandidate{who: who, log: o.log, m: h.m, done: make(chan struct{})}
	cs := loggedClientset(t, cfg, o.log)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: lease, Namespace: namespace},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: who},
	}
	lec := clientgoelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.timings.lease,
		RenewDeadline:   o.timings.renew,
		RetryPeriod:     o.timings.retry,
		ReleaseOnCancel: o.release,
		Name:            who,
		Callbacks: clientgoelection.LeaderCallbacks{
			OnStartedLeading: c.onStarted,
			OnStoppedLeading: func() {},
			OnNewLeader:      c.onNewLeader,
		},
	}
	if _, err := clientgoelection.NewLeaderElector(lec); err != nil {
		t.Fatalf("client-go NewLeaderElector(%s): %v", who, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			le, err := clientgoelection.NewLeaderElector(lec)
			if err != nil {
				c.m.problem("%s: %v", who, err)
				return
			}
			c.le.Store(le)
			le.Run(ctx)
		}
	}()
	h.s.add(c)
	t.Cleanup(func() { c.stop(t) })
	return c
}

// onStarted runs in client-go's goroutine; it returns at once and notes the end of
// the run's context in a context.AfterFunc, since client-go does not wait for it.
func (c *clientGoCandidate) onStarted(ctx context.Context) {
	b := now()
	alive := ctx.Err() == nil
	a := now()
	c.mu.Lock()
	rec := &runRecord{episode: fmt.Sprintf("run %d", len(c.runs)+1), ctx: ctx, started: a}
	c.runs = append(c.runs, rec)
	c.mu.Unlock()
	if alive {
		c.m.leading(c.who, rec.episode, 0, b, a)
	}
	context.AfterFunc(ctx, func() {
		at := now()
		c.m.ended(c.who, rec.episode, at)
		c.mu.Lock()
		rec.ended = at
		c.mu.Unlock()
	})
}

func (c *clientGoCandidate) onNewLeader(id string) {
	c.mu.Lock()
	c.newLeaders = append(c.newLeaders, id)
	c.mu.Unlock()
}

func (c *clientGoCandidate) current() *runRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.runs) == 0 {
		return nil
	}
	return c.runs[len(c.runs)-1]
}

// sample: client-go's leader believes it leads while its run context is live.
func (c *clientGoCandidate) sample(m *monitor) {
	b := now()
	r := c.current()
	alive := r != nil && r.ctx.Err() == nil
	a := now()
	switch {
	case alive:
		m.leading(c.who, r.episode, 0, b, a)
		c.sampled = r.episode
	case c.sampled != "":
		m.ended(c.who, c.sampled, a)
		c.sampled = ""
	}
}

func (c *clientGoCandidate) stop(t testing.TB) {
	t.Helper()
	c.cancel()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Errorf("%s: client-go elector did not return within 30s of cancel", c.who)
	}
}

func (c *clientGoCandidate) leading() bool {
	r := c.current()
	return r != nil && r.ctx.Err() == nil
}

func (c *clientGoCandidate) startedRuns() []runRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]runRecord, len(c.runs))
	for i, r := range c.runs {
		out[i] = *r
	}
	return out
}

func (c *clientGoCandidate) sawLeader(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.newLeaders {
		if l == id {
			return true
		}
	}
	return false
}

// getLeader returns the holder the current Run last observed.
func (c *clientGoCandidate) getLeader() string {
	if le := c.le.Load(); le != nil {
		return le.GetLeader()
	}
	return ""
}
