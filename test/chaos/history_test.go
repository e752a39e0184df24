package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/termctx"
)

// termRec is one term as its candidate believed it: from OnStartedLeading until the
// term context ended.
type termRec struct {
	cand     int    // candidate index
	id       string // identity
	who      string // incarnation: identity#n
	incStart time.Time
	firstSaw time.Time // when the incarnation first saw the lease or its holder
	term     uint64
	sent     time.Time // when the write that started the term was sent, zero if unknown
	start    time.Time
	end      time.Time // zero while the term runs
	cause    error
	// ownLeaseAtEnd: when the term ended, the lease still held the write of this
	// incarnation (it stepped down from a lease nobody took).
	ownLeaseAtEnd bool
	ownLeaseState string
}

func (r *termRec) ended() bool { return !r.end.IsZero() }

// startedTerm is a term its elector started (it called OnStartedLeading), also one
// that ended before its leader work began, with the write whose answer started it
// (the write given version term; known is false if the fault store saw no such answer).
type startedTerm struct {
	who   string
	term  uint64
	write writeRec
	known bool
}

// logEntry is one line of the fault log.
type logEntry struct {
	at   time.Time
	kind string
	text string
}

// probe is what the candidates reported at one moment after the faults stopped.
type probe struct {
	at      time.Time
	leaders []string          // incarnations that lead
	terms   map[string]uint64 // term of each leader
	views   map[string]string // identity -> GetLeader of each live candidate
	down    []string          // identities with no running incarnation
}

// history is everything recorded in one run.
type history struct {
	seed    int64
	test    string
	cfg     leaderelection.Config
	n       int
	begin   time.Time
	healAt  time.Time // all faults over
	checkAt time.Time // heal + bound: one leader by now
	bound   time.Duration
	count   *counters
	srv     *memServer // nil on the real API server
	reg     *register
	logs    *syncBuffer
	exact   bool // terms recorded exactly (fake time) rather than sampled
	sched   []string
	skew    skewMode // the candidates' clocks are skewable (in-memory histories only)
	kube    *kubelet // the kubelet model and the candidates' death watch; nil without

	// mu guards the fields below.
	mu      sync.Mutex
	terms   []*termRec
	started []startedTerm
	faults  []logEntry
	probes  []probe
	errs    []string // unexpected errors (Start failing etc.)
}

func (h *history) rel(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Sub(h.begin).Round(time.Microsecond).String()
}

func (h *history) logFault(kind, format string, args ...any) {
	h.mu.Lock()
	h.faults = append(h.faults, logEntry{at: time.Now(), kind: kind, text: fmt.Sprintf(format, args...)})
	h.mu.Unlock()
}

func (h *history) addErr(format string, args ...any) {
	h.mu.Lock()
	h.errs = append(h.errs, fmt.Sprintf(format, args...))
	h.mu.Unlock()
}

func (h *history) snapshotTerms() []termRec {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]termRec, len(h.terms))
	for i, r := range h.terms {
		out[i] = *r
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for concurrent writes, the elector logs' sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// regOp is one fenced write.
type regOp struct {
	cand      int
	who       string
	term      uint64
	call, ret time.Time
	accepted  bool
}

// register is the fenced resource leaders write to: it accepts a write when its term
// is at least the highest term it accepted, as a store that compares terms does.
// Writes take a little time on each side, so they overlap. Safe for concurrent use.
type register struct {
	// mu guards the fields below.
	mu  sync.Mutex
	max uint64
	ops []regOp
}

func (r *register) write(cand int, who string, term uint64, before, after time.Duration) bool {
	call := time.Now()
	time.Sleep(before)
	r.mu.Lock()
	ok := term >= r.max
	if ok {
		r.max = term
	}
	r.mu.Unlock()
	time.Sleep(after)
	r.mu.Lock()
	r.ops = append(r.ops, regOp{cand: cand, who: who, term: term, call: call, ret: time.Now(), accepted: ok})
	r.mu.Unlock()
	return ok
}

func (r *register) snapshot() []regOp {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

// candidate runs the incarnations of one identity, restarting on request.
type candidate struct {
	h       *history
	idx     int
	id      string
	store   *faultStore
	view    func(who string) leaderelection.LeaseStore
	release bool
	logger  *slog.Logger
	sample  time.Duration // 0: record terms exactly (synctest)
	restart chan time.Duration
	clock   *skewClock // the elector's clock; skew windows change its rate
	cg      *rand.Rand // the client-go renewer's draws (clientGo); run's goroutine only
	healAt  time.Time  // every fault is over: a client-go renewer stops by then

	// mu guards the fields below.
	mu      sync.Mutex
	inc     int
	elector *leaderelection.Elector // nil while down
	cur     *curTerm
}

// curTerm is the running term of the current incarnation.
type curTerm struct {
	ctx context.Context
	rec *termRec
}

func (c *candidate) who(inc int) string { return fmt.Sprintf("%s#%d", c.id, inc) }

// run runs incarnations until ctx ends: each runs until ctx ends or a restart is asked.
func (c *candidate) run(ctx context.Context) {
	for inc := 0; ; inc++ {
		ictx, cancel := context.WithCancel(ctx)
		e, err := c.newElector(inc)
		if err != nil {
			cancel()
			c.h.addErr("%s: new elector: %v", c.who(inc), err)
			return
		}
		done := make(chan error, 1)
		go func() { done <- e.Start(ictx) }()
		var down time.Duration
		var asked time.Time // when the restart was asked: the fault's window starts
		select {
		case <-ctx.Done():
		case down = <-c.restart:
			asked = time.Now()
		}
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			c.h.logFault("start", "%s: Start returned %v", c.who(inc), err)
		}
		if k := c.h.kube; k != nil {
			k.stopped(c.idx, inc) // the process is over: from now on a status may say so
		}
		c.mu.Lock()
		c.elector = nil
		c.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		back := time.Now().Add(down)
		if c.h.kube != nil && !c.release && down != downForever && c.clientGo().IntN(2) == 0 {
			// Within the fault's window, as scheduled, and never after the faults are
			// over (a paused process's Start returns late, a queued restart is taken
			// late): the renews are a fault.
			if !c.clientGoRenew(ctx, inc, earlier(asked.Add(down), c.healAt)) {
				return
			}
		}
		if !sleep(ctx, time.Until(back)) {
			return
		}
	}
}

// clientGo is the candidate's source of the client-go renewer's draws, seeded by the
// history's seed apart from the schedule's, so that a seed keeps its faults.
func (c *candidate) clientGo() *rand.Rand {
	if c.cg == nil {
		c.cg = rand.New(rand.NewPCG(uint64(c.h.seed), 0xc60+uint64(c.idx)))
	}
	return c.cg
}

// clientGoRenew is the crashed incarnation inc's container restarted, until end, with a
// client-go build of the same identity (a StatefulSet pod, an in-place image change):
// every RetryPeriod, from at once, it renews the lease while the lease names its
// identity, as client-go does, keeping the acquireTime and replacing only the spec, so
// Baton's marker and incarnation annotations stay. It leads from each renew for a
// RenewDeadline: a takeover earlier than the lease rules allow from one of its writes
// is a violation (checkKubelet). It reports false when ctx ended.
func (c *candidate) clientGoRenew(ctx context.Context, inc int, end time.Time) bool {
	view := c.view(c.who(inc) + clientGoSuffix)
	for time.Now().Before(end) {
		// A seeded latency below 1ms, so that no renew happens at an instant of fake
		// time shared with another goroutine's step (a seed replays).
		if !sleep(ctx, time.Duration(1+c.clientGo().Int64N(int64(time.Millisecond)))) {
			return false
		}
		if r, err := view.Get(ctx); err == nil && r.HolderIdentity == c.id {
			r.RenewTime = time.Now().Truncate(time.Microsecond)
			if out, err := view.Update(ctx, r); err == nil {
				c.h.count.add(fClientGoRenew, 1)
				c.h.logFault(fClientGoRenew, "%s renewed the lease as client-go (rv %s)", c.who(inc), out.ResourceVersion)
			}
		}
		if !sleep(ctx, min(time.Until(end), c.h.cfg.RetryPeriod)) {
			return false
		}
	}
	return true
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// clientGoSuffix ends the writer name of a client-go renewer's writes.
const clientGoSuffix = "/client-go"

func (c *candidate) newElector(inc int) (*leaderelection.Elector, error) {
	who := c.who(inc)
	incStart := time.Now()
	c.store.setInner(c.view(who))
	cb := leaderelection.Callbacks{
		OnStartedLeading: func(ctx context.Context) { c.lead(ctx, who, incStart) },
		OnStoppedLeading: func() { c.stopped(who) },
	}
	cfg := c.h.cfg
	cfg.Identity = c.id
	cfg.ReleaseOnCancel = c.release
	if c.h.skew.on { // in a bubble only: the true time is the bubble's
		cfg.Clock = c.clock
	}
	// The retry jitter, seeded per candidate and incarnation, so that a seed replays.
	cfg.JitterSource = rand.NewPCG(uint64(c.h.seed)*31+uint64(c.idx), 0x717+uint64(inc))
	if k := c.h.kube; k != nil {
		cfg.Incarnation = k.started(c.idx, inc, who)
		cfg.DeathWatch = k.deathWatch(c, who, inc)
	}
	e, err := leaderelection.NewWithStore(cfg, c.store, cb, c.logger.With("inc", who))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.inc, c.elector, c.cur = inc, e, nil
	c.mu.Unlock()
	return e, nil
}

// lead is OnStartedLeading: it records the term and writes to the register while it
// believes it leads.
func (c *candidate) lead(ctx context.Context, who string, incStart time.Time) {
	term, ok := termctx.FromContext(ctx)
	if !ok {
		c.h.addErr("%s: term context without a term", who)
	}
	w, known := c.store.writeOf(term)
	c.h.mu.Lock()
	c.h.started = append(c.h.started, startedTerm{who: who, term: term, write: w, known: known})
	c.h.mu.Unlock()
	if ctx.Err() != nil {
		return // ended before it began: never believed
	}
	rec := &termRec{cand: c.idx, id: c.id, who: who, incStart: incStart, firstSaw: c.store.sawAt(), term: term,
		sent: w.sent, start: time.Now()}
	c.h.mu.Lock()
	c.h.terms = append(c.h.terms, rec)
	c.h.mu.Unlock()
	c.mu.Lock()
	c.cur = &curTerm{ctx: ctx, rec: rec}
	c.mu.Unlock()
	if c.sample == 0 {
		context.AfterFunc(ctx, func() {
			end := time.Now()
			c.h.mu.Lock()
			rec.end, rec.cause = end, context.Cause(ctx)
			c.h.mu.Unlock()
		})
		c.writeLoop(ctx, who, term, nil)
		return
	}
	c.writeLoop(ctx, who, term, rec)
}

// writeLoop writes to the register every half RetryPeriod or so while ctx lasts. With
// sampled (real time) recording, it checks the term every c.sample and records the
// term's end as the last moment it was seen on (a certain bound of the belief).
func (c *candidate) writeLoop(ctx context.Context, who string, term uint64, sampled *termRec) {
	rp := c.h.cfg.RetryPeriod
	step := rp/2 + time.Duration(c.store.randN(int64(rp/4)+1))
	if sampled != nil {
		step = c.sample
	}
	next := time.Now().Add(rp / 2)
	for {
		if !sleep(ctx, step) {
			break
		}
		before := time.Now()
		if ctx.Err() != nil {
			break
		}
		if sampled != nil {
			c.h.mu.Lock()
			sampled.end = before // certain: still on at before
			c.h.mu.Unlock()
			if time.Now().Before(next) {
				continue
			}
			next = time.Now().Add(rp / 2)
		}
		if c.store.pausePoint() {
			c.h.count.add(fFencedStalled, 1) // checked, paused, now writes late
		}
		d := int64(rp / 20)
		c.h.reg.write(c.idx, who, term, time.Duration(c.store.randN(d+1)), time.Duration(c.store.randN(d+1)))
	}
	if sampled != nil {
		c.h.mu.Lock()
		if sampled.end.IsZero() {
			sampled.end = sampled.start
		}
		sampled.cause = context.Cause(ctx)
		c.h.mu.Unlock()
	}
}

// stopped is OnStoppedLeading: it notes whether the lease still held this
// incarnation's own write (possible only on the in-memory server).
func (c *candidate) stopped(who string) {
	c.mu.Lock()
	cur := c.cur
	c.cur = nil
	c.mu.Unlock()
	if cur == nil || c.h.srv == nil || cur.rec.who != who {
		return
	}
	if !errors.Is(context.Cause(cur.ctx), leaderelection.ErrLeaseLost) {
		return
	}
	r, exists, writer := c.h.srv.current()
	if exists && writer == who && r.HolderIdentity == c.id {
		c.h.mu.Lock()
		cur.rec.ownLeaseAtEnd = true
		cur.rec.ownLeaseState = fmt.Sprintf("rv %s holder %s renewed %s; cause %q", r.ResourceVersion, r.HolderIdentity,
			c.h.rel(r.RenewTime), context.Cause(cur.ctx))
		c.h.mu.Unlock()
	}
}

// state reports the live incarnation's view: leading (and term), and its leader.
func (c *candidate) state() (who string, live, leading bool, term uint64, leader string) {
	c.mu.Lock()
	e, inc := c.elector, c.inc
	c.mu.Unlock()
	if e == nil {
		return c.who(inc), false, false, 0, ""
	}
	term = e.Term()
	return c.who(inc), true, term != 0, term, e.GetLeader()
}
