package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// Errors the fault store injects. None wraps a leaderelection sentinel: to the elector
// they are transport errors.
var (
	errPartitioned = errors.New("chaos: candidate partitioned from the api server")
	errRequestLost = errors.New("chaos: request lost")
	errReplyLost   = errors.New("chaos: reply lost (the request was applied)")
)

// counter kinds: every fault the suite injects, counted where it takes effect.
const (
	fRequestDropped = "request dropped"
	fRequestDelayed = "request delayed"
	fReplyLost      = "reply lost after a successful write"
	fReplyDelayed   = "reply delayed"
	fWatchClosed    = "watch closed (one candidate)"
	fWatchLagged    = "watch event delivered late"
	fGone           = "410 Gone (all watches closed)"
	fLeaseDeleted   = "lease deleted"
	// fDeleteAfterCreate arms the server to delete the lease by hand shortly after the
	// next Create lands (counted as fLeaseDeleted when the delete happens).
	fDeleteAfterCreate = "lease deleted right after a Create"
	fRestore           = "resourceVersion moved back (snapshot restored)"
	fPartition         = "candidate partitioned"
	fPause             = "candidate paused"
	fAPIRestart        = "api server restarted"
	fRealAPIRestart    = "api server restarted (real)"
	fCandRestart       = "candidate restarted"
	fFencedStalled     = "fenced write held by a pause"
	fSkew              = "candidate clock skewed"
	// fWatchSkipped counts watch events after which the store said it skipped states
	// (leaderelection.LeaseEvent.Gap: the MemoryStore behind a relay that held an
	// event, lagging or paused, kept only the latest state).
	fWatchSkipped = "watch event after skipped states (Gap)"
	// fClientGoRenew counts the renews of a crashed leader's restarted container of the
	// same identity running client-go (kubelet histories).
	fClientGoRenew = "same-identity client-go renew"
)

// allKinds lists the counter kinds in report order.
var allKinds = []string{
	fRequestDropped, fRequestDelayed, fReplyLost, fReplyDelayed, fWatchClosed, fWatchLagged,
	fGone, fLeaseDeleted, fRestore, fPartition, fPause, fAPIRestart, fRealAPIRestart, fCandRestart,
	fFencedStalled, fSkew, fWatchSkipped, fClientGoRenew,
	fStaleReport, fForceDelete, fPodWatchBroken, fReportPrompt, fReportLate, fReportNever, fReportNoLine, fReportPodGone,
	fFinalCrash,
}

// counters counts injected faults by kind. Safe for concurrent use.
type counters struct{ m map[string]*atomic.Int64 }

func newCounters() *counters {
	c := &counters{m: make(map[string]*atomic.Int64, len(allKinds))}
	for _, k := range allKinds {
		c.m[k] = new(atomic.Int64)
	}
	return c
}

func (c *counters) add(kind string, n int64) { c.m[kind].Add(n) }

func (c *counters) get(kind string) int64 { return c.m[kind].Load() }

func (c *counters) addAll(o *counters) {
	for _, k := range allKinds {
		c.add(k, o.get(k))
	}
}

func (c *counters) total() int64 {
	var n int64
	for _, k := range allKinds {
		n += c.get(k)
	}
	return n
}

func (c *counters) String() string {
	s := ""
	for _, k := range allKinds {
		if n := c.get(k); n > 0 {
			s += fmt.Sprintf("  %-50s %d\n", k, n)
		}
	}
	return s
}

// flakiness is the chance of each per-call fault while a flaky window is open.
type flakiness struct {
	dropRequest, delayRequest, loseReply, delayReply float64
	maxDelay                                         time.Duration
}

// faultStore is the LeaseStore of one candidate: it passes calls to the store of its
// current incarnation and injects the faults of that candidate: flaky calls (requests
// dropped or delayed, replies lost after the write was applied or delayed), a
// partition (calls fail or hang until their context ends, watches close), a pause
// (calls, watch deliveries and fenced writes held until it ends), closed and lagging
// watches. Safe for concurrent use.
type faultStore struct {
	count *counters

	// mu guards the fields below.
	mu          sync.Mutex
	inner       leaderelection.LeaseStore
	rngs        map[string]*rand.Rand // per operation, so one op's faults do not depend on the others' order
	flaky       flakiness
	flakyOn     bool
	partitioned bool
	hang        bool          // partitioned calls hang until their context ends
	paused      chan struct{} // non-nil while paused; closed on resume
	lag         time.Duration // added to each watch delivery
	relays      map[*relay]struct{}
	// firstSaw is when the current incarnation first saw the lease or its last holder
	// (a read, a write's answer, or an event with a holder handed to its watch) in a
	// state it did not write itself, zero if never: its own writes (sent) tell it of
	// no other holder, so a cold start whose Create's reply was lost, and which then
	// saw and took back its own record, is still one (seed 34712).
	firstSaw time.Time
	// sent are the records of the current incarnation's latest writes (up to maxSent),
	// whatever became of them, to tell its own states from others'.
	sent    []leaderelection.LeaseRecord
	seed    uint64
	watches uint64 // watches opened, to seed each relay's latency
	// delivered is the highest resourceVersion handed to a live watch of the current
	// incarnation (put in the channel the elector reads, whether or not it read it yet).
	delivered uint64
	// writes are the current incarnation's writes whose answer it got, by the
	// resourceVersion they were given.
	writes map[uint64]writeRec
}

// writeRec is one write whose answer the elector got: when it was sent and answered,
// and the highest resourceVersion its watch had been handed by the time of the answer
// (above the write's own when the lease moved past the write before the answer came).
type writeRec struct {
	sent, answered time.Time
	delivered      uint64
}

// netLatency bounds the latency of every call (each way) and watch delivery: random
// per candidate and call, it orders what would otherwise happen at one instant of
// fake time (two candidates' writes, an event and a timer), so that the order does not
// depend on goroutine scheduling and a seed replays exactly.
const netLatency = time.Millisecond

var _ leaderelection.LeaseStore = (*faultStore)(nil)

func newFaultStore(seed uint64, count *counters) *faultStore {
	return &faultStore{
		count: count,
		rngs: map[string]*rand.Rand{
			"get": rand.New(rand.NewPCG(seed, 1)), "create": rand.New(rand.NewPCG(seed, 2)),
			"update": rand.New(rand.NewPCG(seed, 3)), "watch": rand.New(rand.NewPCG(seed, 4)),
			"misc":    rand.New(rand.NewPCG(seed, 5)),
			"net get": rand.New(rand.NewPCG(seed, 6)), "net create": rand.New(rand.NewPCG(seed, 7)),
			"net update": rand.New(rand.NewPCG(seed, 8)), "net watch": rand.New(rand.NewPCG(seed, 9)),
		},
		seed:   seed,
		relays: make(map[*relay]struct{}),
		writes: make(map[uint64]writeRec),
	}
}

// setInner points the store at the store of a new incarnation.
func (f *faultStore) setInner(s leaderelection.LeaseStore) {
	f.mu.Lock()
	f.inner, f.firstSaw, f.delivered = s, time.Time{}, 0
	f.writes, f.sent = make(map[uint64]writeRec), nil
	f.mu.Unlock()
}

// answered records the answer to a write of the current incarnation sent at sent.
func (f *faultStore) answered(out leaderelection.LeaseRecord, sent time.Time) {
	v, err := strconv.ParseUint(out.ResourceVersion, 10, 64)
	if err != nil {
		return
	}
	f.mu.Lock()
	f.writes[v] = writeRec{sent: sent, answered: time.Now(), delivered: f.delivered}
	f.mu.Unlock()
}

// writeOf returns the write of the current incarnation that was given version v.
func (f *faultStore) writeOf(v uint64) (writeRec, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.writes[v]
	return w, ok
}

// handed notes that ev was put in the channel of a watch the elector still holds.
func (f *faultStore) handed(ev leaderelection.LeaseEvent) {
	if !ev.Deleted || ev.Record.HolderIdentity != "" {
		f.saw(ev.Record)
	}
	v, err := strconv.ParseUint(ev.Record.ResourceVersion, 10, 64)
	if err != nil {
		return
	}
	f.mu.Lock()
	f.delivered = max(f.delivered, v)
	f.mu.Unlock()
}

// maxSent bounds faultStore.sent.
const maxSent = 64

// sending notes a write of the current incarnation about to be sent.
func (f *faultStore) sending(r leaderelection.LeaseRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.sent) == maxSent {
		f.sent = append(f.sent[:0], f.sent[1:]...)
	}
	f.sent = append(f.sent, r)
}

// saw notes that the incarnation saw the lease (or its last holder) in state r, unless
// r is one of its own writes (the same holder, times and transitions as one it sent).
func (f *faultStore) saw(r leaderelection.LeaseRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.firstSaw.IsZero() {
		return
	}
	for _, s := range f.sent {
		if s.HolderIdentity == r.HolderIdentity && s.AcquireTime.Equal(r.AcquireTime) &&
			s.RenewTime.Equal(r.RenewTime) && s.LeaseTransitions == r.LeaseTransitions {
			return
		}
	}
	f.firstSaw = time.Now()
}

func (f *faultStore) sawAt() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.firstSaw
}

// plan is what happens to one call.
type plan struct {
	inner                      leaderelection.LeaseStore
	partitioned, hang          bool
	drop, delayReq, lose, slow bool
	reqDelay, replyDelay       time.Duration
	netReq, netReply           time.Duration // latency of the request and of the reply
}

// dice are the random draws of one call, in [0, 1): the same number per call whatever
// the candidate's state, so that the draws of later calls do not depend on it.
type dice struct{ drop, delayReq, lose, slow, reqDelay, replyDelay, netReq, netReply float64 }

// roll draws the dice of a call of op. Calls draw when they start, before a pause
// holds them: calls of one op released together by a resume would draw in the order
// the scheduler runs them.
func (f *faultStore) roll(op string) dice {
	f.mu.Lock()
	defer f.mu.Unlock()
	rng, net := f.rngs[op], f.rngs["net "+op]
	return dice{
		drop: rng.Float64(), delayReq: rng.Float64(), lose: rng.Float64(), slow: rng.Float64(),
		reqDelay: rng.Float64(), replyDelay: rng.Float64(), netReq: net.Float64(), netReply: net.Float64(),
	}
}

// plan decides the call of d by the candidate's state now.
func (f *faultStore) plan(d dice) plan {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := plan{inner: f.inner, partitioned: f.partitioned, hang: f.hang}
	p.netReq = time.Duration(d.netReq * float64(netLatency))
	p.netReply = time.Duration(d.netReply * float64(netLatency))
	if !f.flakyOn || p.partitioned {
		return p
	}
	fl := f.flaky
	p.drop = d.drop < fl.dropRequest
	p.delayReq = d.delayReq < fl.delayRequest
	p.lose = d.lose < fl.loseReply
	p.slow = d.slow < fl.delayReply
	p.reqDelay = time.Duration(d.reqDelay * float64(fl.maxDelay))
	p.replyDelay = time.Duration(d.replyDelay * float64(fl.maxDelay))
	return p
}

// pausePoint blocks while the candidate is paused.
func (f *faultStore) pausePoint() bool {
	f.mu.Lock()
	ch := f.paused
	f.mu.Unlock()
	if ch == nil {
		return false
	}
	<-ch
	return true
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// call runs op under the candidate's faults. write marks ops whose reply may be lost
// after they were applied.
func (f *faultStore) call(ctx context.Context, name string, write bool, op func(leaderelection.LeaseStore) error) error {
	d := f.roll(name)
	f.pausePoint()
	p := f.plan(d)
	// The request's latency comes first, also for a call that then fails: calls that a
	// resume releases together end at distinct instants.
	if !sleep(ctx, p.netReq) {
		return ctx.Err()
	}
	switch {
	case p.partitioned && p.hang:
		<-ctx.Done()
		return fmt.Errorf("%w: %w", errPartitioned, ctx.Err())
	case p.partitioned:
		return errPartitioned
	case p.drop:
		f.count.add(fRequestDropped, 1)
		if !sleep(ctx, p.reqDelay) {
			return ctx.Err()
		}
		return errRequestLost
	case p.delayReq:
		f.count.add(fRequestDelayed, 1)
		if !sleep(ctx, p.reqDelay) {
			return ctx.Err()
		}
	}
	err := op(p.inner)
	f.pausePoint() // a pause between the server's answer and the caller reading it
	if !sleep(ctx, p.netReply) {
		return ctx.Err() // for a write that went through, a lost reply
	}
	if err == nil && write && p.lose {
		f.count.add(fReplyLost, 1)
		sleep(ctx, p.replyDelay)
		return errReplyLost
	}
	if p.slow {
		f.count.add(fReplyDelayed, 1)
		if !sleep(ctx, p.replyDelay) {
			return ctx.Err() // the caller gave up: for a write that went through, a lost reply
		}
	}
	return err
}

func (f *faultStore) Get(ctx context.Context) (leaderelection.LeaseRecord, error) {
	var out leaderelection.LeaseRecord
	err := f.call(ctx, "get", false, func(s leaderelection.LeaseStore) (err error) {
		out, err = s.Get(ctx)
		return err
	})
	if err == nil {
		f.saw(out)
	}
	return out, err
}

func (f *faultStore) Create(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	sent := time.Now()
	f.sending(r)
	var out leaderelection.LeaseRecord
	err := f.call(ctx, "create", true, func(s leaderelection.LeaseStore) (err error) {
		out, err = s.Create(ctx, r)
		return err
	})
	if err != nil {
		return leaderelection.LeaseRecord{}, err
	}
	f.saw(out)
	f.answered(out, sent)
	return out, nil
}

func (f *faultStore) Update(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	sent := time.Now()
	f.sending(r)
	var out leaderelection.LeaseRecord
	err := f.call(ctx, "update", true, func(s leaderelection.LeaseStore) (err error) {
		out, err = s.Update(ctx, r)
		return err
	})
	if err != nil {
		return leaderelection.LeaseRecord{}, err
	}
	f.saw(out)
	f.answered(out, sent)
	return out, nil
}

func (f *faultStore) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inner.String()
}

// relayBuffer is how many events a relay holds for the elector to read.
const relayBuffer = 16

// relay forwards one watch to the candidate, late while the watch lags, held while the
// candidate is paused; closing kill ends it.
type relay struct {
	kill chan struct{}
	once sync.Once
}

func (r *relay) close() { r.once.Do(func() { close(r.kill) }) }

func (r *relay) killed() bool {
	select {
	case <-r.kill:
		return true
	default:
		return false
	}
}

func (f *faultStore) Watch(ctx context.Context) (<-chan leaderelection.LeaseEvent, error) {
	var in <-chan leaderelection.LeaseEvent
	wctx, cancel := context.WithCancel(ctx)
	err := f.call(wctx, "watch", false, func(s leaderelection.LeaseStore) (err error) {
		in, err = s.Watch(wctx)
		return err
	})
	if err != nil {
		cancel()
		return nil, err
	}
	r := &relay{kill: make(chan struct{})}
	f.mu.Lock()
	if f.partitioned { // partitioned while the watch opened
		f.mu.Unlock()
		cancel()
		return nil, errPartitioned
	}
	f.relays[r] = struct{}{}
	f.watches++
	net := rand.New(rand.NewPCG(f.seed, 1000+f.watches))
	f.mu.Unlock()
	// Buffered, as a client's watch is: events arrive while the elector is busy (in a
	// write), and it can read them all at once afterwards.
	out := make(chan leaderelection.LeaseEvent, relayBuffer)
	go func() {
		defer close(out)
		defer func() {
			cancel()
			f.mu.Lock()
			delete(f.relays, r)
			f.mu.Unlock()
		}()
		f.forward(wctx, r, in, out, net)
	}()
	return out, nil
}

// forward relays in to out: each event after a latency drawn from net (up to
// netLatency), plus the lag while the watch lags, and after a pause ends.
func (f *faultStore) forward(ctx context.Context, r *relay, in <-chan leaderelection.LeaseEvent, out chan<- leaderelection.LeaseEvent, net *rand.Rand) {
	for {
		var ev leaderelection.LeaseEvent
		select {
		case e, ok := <-in:
			if !ok {
				return
			}
			ev = e
		case <-r.kill:
			return
		case <-ctx.Done():
			return
		}
		f.mu.Lock()
		lag := f.lag
		f.mu.Unlock()
		if lag > 0 {
			f.count.add(fWatchLagged, 1)
		}
		if !f.hold(ctx, r, lag+time.Duration(net.Int64N(int64(netLatency))), net) {
			return
		}
		if ctx.Err() != nil || r.killed() {
			return // ended at the instant of delivery: never delivered (a seed replays)
		}
		select {
		case out <- ev:
			if ctx.Err() == nil { // still the elector's: it may read ev from now on
				f.handed(ev)
				if ev.Gap {
					f.count.add(fWatchSkipped, 1)
				}
			}
		case <-r.kill:
			return
		case <-ctx.Done():
			return
		}
	}
}

// hold waits d, then while the candidate is paused, with a new latency from net after
// each resume, so that deliveries a resume releases together (and the calls it
// releases) arrive at distinct instants. It reports false when r or ctx ended.
func (f *faultStore) hold(ctx context.Context, r *relay, d time.Duration, net *rand.Rand) bool {
	for {
		if d > 0 {
			select {
			case <-time.After(d):
			case <-r.kill:
				return false
			case <-ctx.Done():
				return false
			}
		}
		f.mu.Lock()
		paused := f.paused
		f.mu.Unlock()
		if paused == nil {
			return true
		}
		select {
		case <-paused:
		case <-r.kill:
			return false
		case <-ctx.Done():
			return false
		}
		d = time.Duration(net.Int64N(int64(netLatency)))
	}
}

// closeWatches ends the candidate's watches; it returns how many.
func (f *faultStore) closeWatches() int {
	f.mu.Lock()
	rs := make([]*relay, 0, len(f.relays))
	for r := range f.relays {
		rs = append(rs, r)
		delete(f.relays, r)
	}
	f.mu.Unlock()
	for _, r := range rs {
		r.close()
	}
	return len(rs)
}

func (f *faultStore) setFlaky(on bool, fl flakiness) {
	f.mu.Lock()
	f.flakyOn, f.flaky = on, fl
	f.mu.Unlock()
}

func (f *faultStore) setLag(d time.Duration) {
	f.mu.Lock()
	f.lag = d
	f.mu.Unlock()
}

// partition cuts the candidate off (hang: its calls hang until they time out) and
// closes its watches, or heals it.
func (f *faultStore) partition(on, hang bool) {
	f.mu.Lock()
	f.partitioned, f.hang = on, hang
	f.mu.Unlock()
	if on {
		f.closeWatches()
	}
}

// pause holds the candidate's calls, deliveries and fenced writes, or resumes them.
func (f *faultStore) pause(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case on && f.paused == nil:
		f.paused = make(chan struct{})
	case !on && f.paused != nil:
		close(f.paused)
		f.paused = nil
	}
}

// rand returns a random number in [0, n) from the candidate's source.
func (f *faultStore) randN(n int64) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rngs["misc"].Int64N(n)
}

// isPartitioned reports whether the candidate is partitioned now.
func (f *faultStore) isPartitioned() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.partitioned
}

// lagNow is the lag of the candidate's watches now.
func (f *faultStore) lagNow() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lag
}

// holdPaused waits while the candidate is paused, then a latency from net, so that
// what a resume releases happens at distinct instants; it reports false when ctx
// ended.
func (f *faultStore) holdPaused(ctx context.Context, net *rand.Rand) bool {
	for {
		f.mu.Lock()
		paused := f.paused
		f.mu.Unlock()
		if paused == nil {
			return ctx.Err() == nil
		}
		select {
		case <-paused:
		case <-ctx.Done():
			return false
		}
		if !sleep(ctx, time.Duration(net.Int64N(int64(netLatency)))) {
			return false
		}
	}
}
