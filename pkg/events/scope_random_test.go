package events_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/internal/testseed"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// TestScopeConcurrentRandomized tries to break every "never" of Scope's doc
// with several goroutines at once, each on a seeded schedule:
//
//   - period drivers begin and end periods (cancel then End, End then
//     cancel, late Ends of earlier periods, Begin without End, Begin with a
//     context already done), and, in some seeds, Close the scope or Stop
//     the bus at a random point;
//   - subscribers call Subscribe[T] under a period's context (current or
//     earlier), under contexts derived from it, twice for one name, with
//     another T or buffer, and Unsubscribe channels they were given;
//   - publishers publish numbered events of four types, two of them state
//     published with NextSequence stamps and republished from a cache;
//   - a reader per channel reads at once, slowly, only after a while (so
//     that the bus queues for it, then hands over what waited), or only
//     once its period ended, so LatestValue queues, evictions and drop
//     reports happen;
//   - a Critical subscriber of "a", routed before every scoped one and
//     never read, makes each delivery of "a" let go of its topic's lock to
//     report a drop, with the scoped routes still to be offered; from
//     there it now and then ends or begins a period (and subscribes) itself,
//     and holds every third delivery while periods end and begin;
//   - a sampler reads Stats.
//
// The checker asserts: every channel is closed, once (a second close
// panics), without Stop once every context is done and the scope closed;
// a channel yields only its types, each publisher's events in order, none
// twice, state versions only forward, and nothing published before its
// Subscribe began, nor an event whose delivery had taken its topic's lock
// before (the drop report marks it), as a reused route would; a kept
// channel (one the scope holds) yields nothing published after its
// period's end (or its Unsubscribe, or Stop) returned; at most one channel
// per name and period is kept, never one of a derived context or of a
// period that ended or never began, always one of the same T and buffer,
// and the first call of a name in a period that lasts is kept; a scoped
// subscription is listed in Stats only while its period lasts; Totals
// never go down, cover the live subscriptions, and add up: Delivered is
// what the readers got (plain subscriptions), or that plus Skipped plus at
// most Dropped and what the ends discarded (LatestValue); Delivered+Dropped
// lies between the events published while a channel was surely routed and
// those published or replayed while it might have been. goleak (TestMain)
// checks that every goroutine ended, and -race the rest.
//
// The checker was checked against broken scopes: a renew that reuses the
// routes a delivery still holds, a late End that ends the current period,
// a LatestValue queue not emptied for the next period, Begin with a done
// context starting a period, skipped counts carried over, subscriptions
// counted twice in Totals: each fails it.
//
// Seeds 1 to 8 run by default (4 in -short), BATON_SCOPE_SEEDS=<n> runs
// 1 to n; a failure names its seed, and BATON_SEED=<seed> replays that
// seed's schedule (the interleaving is the scheduler's).
func TestScopeConcurrentRandomized(t *testing.T) {
	n := 8
	if s := os.Getenv("BATON_SCOPE_SEEDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("BATON_SCOPE_SEEDS=%q: want a positive integer", s)
		}
		n = v
	}
	if testing.Short() {
		n = min(n, 4)
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	for _, seed := range testseed.Seeds(t, seeds...) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { newScopeRun(t, seed).run() })
	}
}

// Publishers: each numbers its calls from 0 and makes one at a time.
const (
	pubA  = iota // Publish of type "a"
	pubB         // Publish of type "b"
	pubS         // state of type "s", Publish with a NextSequence stamp
	pubST        // state of type "st" (*stEv), likewise
	repS         // Republish of the cached "s"
	repST        // Republish of the cached "st"
	nPubs
)

var pubType = [nPubs]string{"a", "b", "s", "st", "s", "st"}

// rEv is an event of the randomized scope test: publisher pub's call n,
// with the state version ver for state types.
type rEv struct {
	typ    string
	pub, n int
	ver    int
}

func (e *rEv) EventType() string  { return e.typ }
func (*rEv) Timestamp() time.Time { return time.Time{} }
func (e *rEv) tag() *rEv          { return e }

// stEv is a state event of its own Go type, routed by its EventType.
type stEv struct{ rEv }

func (*stEv) EventType() string { return "st" }

type tagged interface{ tag() *rEv }

// snapshot holds a number per publisher (see before and after).
type snapshot [nPubs]int

// noCeil is a snapshot above every number.
var noCeil = snapshot{1 << 62, 1 << 62, 1 << 62, 1 << 62, 1 << 62, 1 << 62}

func minSnap(a, b snapshot) snapshot {
	for i := range a {
		a[i] = min(a[i], b[i])
	}
	return a
}

// publisher numbers its calls from 0; one goroutine makes them, one at a
// time: started is the number of calls begun, done of calls returned,
// both read without waiting for a call in progress, so that subscriptions
// and period ends overlap deliveries.
type publisher struct {
	started, done atomic.Int64
	// locked is set by the Critical blocker's drop report: the events of
	// this publisher below it had their delivery take its topic's lock,
	// and so were given to the routes present then and no other.
	locked atomic.Int64

	// mu guards the state below: the last version, and the cached one with
	// its NextSequence stamp.
	mu       sync.Mutex
	ver      int
	cacheVer int
	cacheSeq uint64
}

// spec is how a name is subscribed.
type spec struct {
	name    string
	variant int      // 0: the name's canonical form
	types   []string // nil: every type
	latest  bool
	buffer  int
	sub     func(ctx context.Context, b *busevents.EventBus) handle
}

type handle struct {
	ch    any
	recv  func() (tagged, bool)
	unsub func()
}

func mkSpec[T busevents.Event](name string, variant, buffer int, latest bool, types []string, opts ...busevents.SubscribeOption) *spec {
	return &spec{name: name, variant: variant, types: types, latest: latest, buffer: buffer,
		sub: func(ctx context.Context, b *busevents.EventBus) handle {
			ch := busevents.Subscribe[T](ctx, b, name, buffer, opts...)
			return handle{
				ch: ch,
				recv: func() (tagged, bool) {
					v, ok := <-ch
					if !ok {
						return nil, false
					}
					return any(v).(tagged), true
				},
				unsub: func() { busevents.Unsubscribe(b, ch) },
			}
		}}
}

func yieldDrop(busevents.Drop) { runtime.Gosched() }

// scopeSpecs returns the names subscribed, each a list of forms (the
// first canonical). Only "v" is ever subscribed in another form.
func scopeSpecs() [][]*spec {
	return [][]*spec{
		{mkSpec[busevents.Event]("k-event", 0, 3, false, []string{"a", "s"}, busevents.Types("a", "s"))},
		{mkSpec[*rEv]("k-typed", 0, 2, false, []string{"a", "b", "s"}, busevents.Types("a", "b", "s"), busevents.Critical(yieldDrop))},
		{mkSpec[busevents.Event]("k-latest", 0, 3, true, []string{"b", "s", "st"},
			busevents.Types("b", "s", "st"), busevents.LatestValue("s", "st"), busevents.Critical(yieldDrop))},
		{mkSpec[*stEv]("k-st", 0, 1, true, []string{"st"}, busevents.LatestValue())},
		{mkSpec[busevents.Event]("k-all", 0, 4, false, nil)},
		{
			mkSpec[*rEv]("v", 0, 2, false, []string{"a", "b"}, busevents.Types("a", "b")),
			mkSpec[*rEv]("v", 1, 5, false, []string{"a", "b"}, busevents.Types("a", "b")),
			mkSpec[busevents.Event]("v", 2, 2, false, []string{"a", "b"}, busevents.Types("a", "b")),
		},
	}
}

// soloSpec is subscribed by the period driver alone, under its lock, once
// per period at most and never unsubscribed, so that Stats can be checked
// exactly against the model.
var soloSpec = mkSpec[*rEv]("solo", 0, 2, false, []string{"a"}, busevents.Types("a"))

// unbegunSpec is subscribed by the period driver under the context of a
// Begin that started no period (its context done, or the scope closed).
var unbegunSpec = mkSpec[*rEv]("unbegun", 0, 2, false, []string{"a"}, busevents.Types("a"))

// scopePeriod is one period of the model. Its fields change under
// scopeRun.opMu; the checker reads them once every goroutine is done.
type scopePeriod struct {
	ctx    context.Context
	cancel context.CancelFunc
	// current: Begin made it the scope's period.
	current bool
	// ended is set when Begin, End or Close ended it, endEpoch being the
	// epoch that did; endBefore and endAfter are snapshots taken just
	// before and after that call.
	ended               bool
	endEpoch            int64
	endBefore, endAfter snapshot
	// canceled is set once cancel ran, cancelBefore taken just before.
	canceled     bool
	cancelBefore snapshot
	done         chan struct{} // closed once ended or canceled: stalled readers go on
}

func (p *scopePeriod) release() {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
}

// chanRec is one channel handed out, and what its reader got.
type chanRec struct {
	spec       *spec
	p          *scopePeriod
	derived    bool
	derivedCtx context.Context
	kept       bool
	mustKeep   bool // the call's circumstances require the scope to keep it
	startEpoch int64
	h          handle

	// floorLo is, per publisher, the number below which an event was
	// published before Subscribe began, or its delivery took its topic's
	// lock before; floorHi is from which events began after it returned.
	floorLo, floorHi snapshot

	// guarded by scopeRun.recMu:
	unsubbed                bool
	unsubBefore, unsubAfter snapshot
	derivedCancelBefore     *snapshot

	// written by the reader alone, read once it is done:
	got      []*rEv
	closedAt snapshot
	closed   atomic.Bool // set by the reader once it saw the close
}

type scopeRun struct {
	t    *testing.T
	seed uint64
	b    *busevents.EventBus
	sc   *busevents.Scope
	pubs [nPubs]publisher

	// opMu serializes the model's changes: Begin, End, Close, Stop and the
	// cancel of a period's context.
	opMu     sync.Mutex
	periods  []*scopePeriod
	stopped  bool
	stopSnap [2]snapshot // before, after Stop
	closed   bool
	finished bool // finish cancelled every period: none is made after
	// epoch counts the model's changes of the current period; cur is the
	// current one. Both are written under opMu, cur first.
	epoch atomic.Int64
	cur   atomic.Pointer[scopePeriod]

	recMu sync.Mutex
	recs  []*chanRec
	calls map[string]int // Subscribe calls started, by name and period
	specs [][]*spec

	// budget is the number of events publishers may still publish: each
	// operation of the drivers and subscribers adds some, so that the
	// publishers neither starve the others nor publish far more than the
	// operations can observe.
	budget atomic.Int64

	readers sync.WaitGroup
	phase2  chan struct{}
	failed  atomic.Bool
}

func newScopeRun(t *testing.T, seed uint64) *scopeRun {
	b := busevents.NewEventBusWithLogger(0, slog.New(slog.DiscardHandler))
	return &scopeRun{t: t, seed: seed, b: b, sc: busevents.NewScope(b),
		calls: map[string]int{}, specs: scopeSpecs(), phase2: make(chan struct{})}
}

const budgetPerOp = 24

func (r *scopeRun) spend() bool {
	if r.budget.Add(-1) < 0 {
		r.budget.Add(1)
		return false
	}
	return true
}

func (r *scopeRun) fail(format string, args ...any) {
	r.failed.Store(true)
	r.t.Errorf("seed %d: "+format, append([]any{r.seed}, args...)...)
}

func (r *scopeRun) rng(stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(r.seed, 0x5c0be+stream))
}

// before reads, per publisher, the number below which every call has
// returned: an event numbered below it was published before the call that
// follows began.
func (r *scopeRun) before() snapshot {
	var s snapshot
	for i := range r.pubs {
		s[i] = int(r.pubs[i].done.Load())
	}
	return s
}

// after reads, per publisher, the number from which no call has begun: an
// event numbered at or above it was published after the call that came
// before returned.
func (r *scopeRun) after() snapshot {
	var s snapshot
	for i := range r.pubs {
		s[i] = int(r.pubs[i].started.Load())
	}
	return s
}

// floor returns what a channel subscribed now must get nothing below:
// events published before, and those whose delivery took its topic's lock
// before (see publisher.locked).
func (r *scopeRun) floor() snapshot {
	s := r.before()
	for i := range r.pubs {
		s[i] = max(s[i], int(r.pubs[i].locked.Load()))
	}
	return s
}

func (r *scopeRun) run() {
	defer r.b.Stop()
	r.b.Start()
	rng := r.rng(0)
	closeAt, stopAt := -1, -1
	switch r.seed % 4 {
	case 1:
		closeAt = 40 + rng.IntN(55)
	case 2:
		stopAt = 40 + rng.IntN(55)
	}
	r.startCriticalBlocker()
	var pubs, work sync.WaitGroup
	stopPub := make(chan struct{})
	for p := range []int{pubA, pubB, pubS, pubST} {
		pubs.Go(func() { r.publish(p, stopPub) })
	}
	pubs.Go(func() { r.replay(stopPub) })
	samplerDone := make(chan struct{})
	pubs.Go(func() { r.sample(samplerDone) })
	work.Go(func() { r.drive(1, 100, closeAt, stopAt) })
	work.Go(func() { r.drive(2, 60, -1, -1) })
	for i := range 3 {
		work.Go(func() { r.subscribeLoop(uint64(10+i), 80) })
	}
	work.Wait()
	r.finish()
	close(stopPub)
	close(samplerDone)
	pubs.Wait()
	if !r.failed.Load() {
		r.check()
	}
}

// startCriticalBlocker subscribes, before any scoped subscription, a
// Critical subscriber of a with a buffer of 1 and a reader that does not
// read until the end: each delivery of a reports its drop,
// letting go of the topic's lock with the scoped routes behind it still to
// be offered. The report marks the event as past its topic's lock (see
// publisher.locked), now and then ends or begins a period itself, and
// every third time waits for periods to end and begin meanwhile.
func (r *scopeRun) startCriticalBlocker() {
	ctx, cancel := context.WithCancel(context.Background())
	var reports atomic.Int64
	rng := r.rng(2) // onDrop runs on pubA's goroutine alone
	onDrop := func(d busevents.Drop) {
		pub := &r.pubs[pubA]
		pub.locked.Store(pub.started.Load()) // the event being delivered is started-1
		if rng.IntN(16) == 0 {
			// A period operation from inside the delivery, which holds
			// the routes it is still to offer to.
			r.opMu.Lock()
			if !r.finished {
				r.periodOpLocked(rng)
			}
			r.opMu.Unlock()
		}
		if reports.Add(1)%3 != 0 {
			return
		}
		for e, i := r.epoch.Load(), 0; r.epoch.Load() < e+3 && i < 200; i++ {
			runtime.Gosched()
		}
	}
	ch := busevents.Subscribe[*rEv](ctx, r.b, "blocker", 1, busevents.Types("a"), busevents.Critical(onDrop))
	r.readers.Go(func() {
		<-r.phase2
		cancel()
		for range ch {
		}
	})
}

func (r *scopeRun) publish(p int, stop <-chan struct{}) {
	pub := &r.pubs[p]
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		if i%4 == 3 || !r.spend() {
			runtime.Gosched()
			continue
		}
		pub.mu.Lock()
		e := &rEv{typ: pubType[p], pub: p, n: int(pub.started.Add(1) - 1)}
		var seq uint64
		if p == pubS || p == pubST {
			pub.ver++
			e.ver = pub.ver
			seq = r.b.NextSequence()
		}
		var ev busevents.Event = e
		if p == pubST {
			ev = &stEv{*e}
		}
		r.b.Publish(ev)
		if seq != 0 {
			pub.cacheVer, pub.cacheSeq = e.ver, seq
		}
		pub.done.Add(1)
		pub.mu.Unlock()
	}
}

// replay republishes the cached state of s and st, as a replayer does.
func (r *scopeRun) replay(stop <-chan struct{}) {
	rng := r.rng(1)
	for {
		select {
		case <-stop:
			return
		default:
		}
		runtime.Gosched()
		if !r.spend() {
			continue
		}
		from, rep := pubS, repS
		if rng.IntN(2) == 0 {
			from, rep = pubST, repST
		}
		src := &r.pubs[from]
		src.mu.Lock()
		ver, seq := src.cacheVer, src.cacheSeq
		src.mu.Unlock()
		if ver == 0 {
			continue
		}
		pub := &r.pubs[rep]
		pub.mu.Lock()
		e := &rEv{typ: pubType[rep], pub: rep, n: int(pub.started.Add(1) - 1), ver: ver}
		var ev busevents.Event = e
		if rep == repST {
			ev = &stEv{*e}
		}
		r.b.Republish(ev, seq)
		pub.done.Add(1)
		pub.mu.Unlock()
	}
}

// sample reads Stats until done: Totals never go down, and cover what is
// live.
func (r *scopeRun) sample(done <-chan struct{}) {
	prev := map[string]busevents.SubscriberStats{}
	for {
		select {
		case <-done:
			return
		default:
		}
		runtime.Gosched()
		st := r.b.Stats()
		live := map[string]busevents.SubscriberStats{}
		for _, s := range st.Subscribers {
			l, ok := live[s.Name]
			if !ok {
				l = busevents.SubscriberStats{Name: s.Name, Delivered: map[string]uint64{}, Dropped: map[string]uint64{}, Skipped: map[string]uint64{}}
			}
			addCounts(l.Delivered, s.Delivered)
			addCounts(l.Dropped, s.Dropped)
			addCounts(l.Skipped, s.Skipped)
			live[s.Name] = l
		}
		for _, tot := range st.Totals {
			p := prev[tot.Name]
			for what, m := range map[string][2]map[string]uint64{
				"Delivered": {tot.Delivered, p.Delivered}, "Dropped": {tot.Dropped, p.Dropped}, "Skipped": {tot.Skipped, p.Skipped},
			} {
				for typ, v := range m[1] {
					if m[0][typ] < v {
						r.fail("Totals[%s].%s[%s] went down from %d to %d", tot.Name, what, typ, v, m[0][typ])
					}
				}
			}
			l := live[tot.Name]
			for typ, v := range l.Delivered {
				if tot.Delivered[typ] < v {
					r.fail("Totals[%s].Delivered[%s] = %d, below the live subscriptions' %d", tot.Name, typ, tot.Delivered[typ], v)
				}
			}
			prev[tot.Name] = tot
		}
		for name := range live {
			if !slices.ContainsFunc(st.Totals, func(s busevents.SubscriberStats) bool { return s.Name == name }) {
				r.fail("live subscriber %q has no Totals entry", name)
			}
		}
		if r.failed.Load() {
			return
		}
	}
}

func addCounts(dst, src map[string]uint64) {
	for k, v := range src {
		dst[k] += v
	}
}

// newPeriod makes a period's context, under a leader-only context as the
// lifecycle Manager's, and records it. opMu must be held.
func (r *scopeRun) newPeriodLocked() *scopePeriod {
	ctx, cancel := context.WithCancel(busevents.WithScope(busevents.WithLeaderOnly(context.Background()), r.sc))
	p := &scopePeriod{ctx: ctx, cancel: cancel, done: make(chan struct{})}
	r.periods = append(r.periods, p)
	return p
}

// leaveCurLocked starts a call that may end the current period: the
// model has no current period from here on, and a Subscribe that sees the
// same epoch before and after it ran saw no such call. It returns the
// period the call may end. opMu must be held.
func (r *scopeRun) leaveCurLocked() *scopePeriod {
	p := r.cur.Load()
	r.cur.Store(nil)
	r.epoch.Add(1)
	return p
}

// endedLocked records that the call begun by leaveCurLocked, between
// snapshots before and after, ended p (if not nil). opMu must be held.
func (r *scopeRun) endedLocked(p *scopePeriod, before, after snapshot) {
	if p == nil {
		return
	}
	p.ended, p.endBefore, p.endAfter = true, before, after
	p.endEpoch = r.epoch.Add(1)
	p.release()
	r.checkSoloLocked(0)
}

func (r *scopeRun) cancelLocked(p *scopePeriod) {
	if p.canceled {
		return
	}
	p.canceled, p.cancelBefore = true, r.before()
	p.cancel()
	p.release()
}

// drive runs n period operations.
func (r *scopeRun) drive(stream uint64, n, closeAt, stopAt int) {
	rng := r.rng(stream)
	for i := range n {
		r.budget.Add(budgetPerOp)
		runtime.Gosched()
		r.opMu.Lock()
		switch {
		case i == closeAt:
			p, before := r.leaveCurLocked(), r.before()
			r.sc.Close()
			r.endedLocked(p, before, r.after())
			r.closed = true
		case i == stopAt:
			before := r.before()
			r.b.Stop()
			r.stopSnap = [2]snapshot{before, r.after()}
			r.stopped = true
		default:
			r.periodOpLocked(rng)
		}

		r.opMu.Unlock()
	}
}

// periodOpLocked does one random period operation. opMu must be held.
func (r *scopeRun) periodOpLocked(rng *rand.Rand) {
	cur := r.cur.Load()
	switch k := rng.IntN(10); {
	case k < 4 || cur == nil: // Begin, ending the current period if any
		p := r.newPeriodLocked()
		if rng.IntN(8) == 0 {
			r.cancelLocked(p) // a context already done: no period
		}
		old, before := r.leaveCurLocked(), r.before()
		r.sc.Begin(p.ctx)
		r.endedLocked(old, before, r.after())
		if !r.closed && !p.canceled {
			p.current = true
			r.cur.Store(p)
			r.epoch.Add(1)
		}
		if rng.IntN(2) == 0 {
			r.subscribeSoloLocked(p) // also in the period that did not begin
		}
	case k < 6: // as a runtime: cancel, then End
		r.cancelLocked(cur)
		r.leaveCurLocked()
		before := r.before()
		r.sc.End(cur.ctx)
		r.endedLocked(cur, before, r.after())
	case k < 7: // End, then cancel
		r.leaveCurLocked()
		before := r.before()
		r.sc.End(cur.ctx)
		r.endedLocked(cur, before, r.after())
		r.cancelLocked(cur)
	default: // a late End of an earlier period: nothing
		old := r.periods[rng.IntN(len(r.periods))]
		if old == cur {
			return
		}
		r.sc.End(old.ctx)
		r.cancelLocked(old)
	}
}

// subscribeSoloLocked subscribes "solo" in p, just begun, and checks that
// Stats lists it; if Begin started no period (p's context was done, or the
// scope closed) it subscribes "unbegun" instead, which the check of kept
// channels says must not be kept. opMu must be held.
func (r *scopeRun) subscribeSoloLocked(p *scopePeriod) {
	sp := soloSpec
	if !p.current {
		sp = unbegunSpec
	}
	rec := &chanRec{spec: sp, p: p, startEpoch: r.epoch.Load(), floorLo: r.floor()}
	rec.h = sp.sub(p.ctx, r.b)
	rec.floorHi = r.after()
	rec.kept = busevents.ScopeKeeps(r.sc, rec.h.ch)
	rec.mustKeep = p.current && !r.stopped
	r.addRec(rec, r.rng(uint64(len(r.periods))+1000))
	if p.current {
		r.checkSoloLocked(1)
	}
}

// checkSoloLocked checks that Stats lists want live "solo" subscriptions
// (no check after Stop). opMu must be held.
func (r *scopeRun) checkSoloLocked(want int) {
	if r.stopped {
		want = 0
	}
	n := 0
	for _, s := range r.b.Stats().Subscribers {
		if s.Name == soloSpec.name {
			n++
		}
	}
	if n != want {
		r.fail("Stats lists %d live %q subscriptions, want %d (period current: %t)", n, soloSpec.name, want, want == 1)
	}
}

// subscribeLoop makes n random subscriptions and unsubscriptions.
func (r *scopeRun) subscribeLoop(stream uint64, n int) {
	rng := r.rng(stream)
	for range n {
		r.budget.Add(budgetPerOp)
		runtime.Gosched()
		if rng.IntN(6) == 0 {
			r.unsubscribeOne(rng)
			continue
		}
		r.opMu.Lock()
		p := r.cur.Load()
		if p == nil || rng.IntN(8) == 0 {
			if len(r.periods) == 0 {
				r.opMu.Unlock()
				continue
			}
			p = r.periods[rng.IntN(len(r.periods))]
		}
		r.opMu.Unlock()
		forms := r.specs[rng.IntN(len(r.specs))]
		sp := forms[0]
		if len(forms) > 1 && rng.IntN(3) == 0 {
			sp = forms[rng.IntN(len(forms))]
		}
		r.subscribeOne(rng, p, sp, rng.IntN(6) == 0)
	}
}

func (r *scopeRun) subscribeOne(rng *rand.Rand, p *scopePeriod, sp *spec, derived bool) {
	rec := &chanRec{spec: sp, p: p, derived: derived}
	ctx := p.ctx
	var cancelDerived context.CancelFunc
	if derived {
		ctx, cancelDerived = deriveCtx(p.ctx)
		rec.derivedCtx = ctx
	}
	key := fmt.Sprintf("%s/%p", sp.name, p)
	r.recMu.Lock()
	r.calls[key]++
	r.recMu.Unlock()
	e1, cur1 := r.epoch.Load(), r.cur.Load()
	rec.startEpoch = e1
	rec.floorLo = r.floor()
	rec.h = sp.sub(ctx, r.b)
	rec.floorHi = r.after()
	rec.kept = busevents.ScopeKeeps(r.sc, rec.h.ch)
	e2 := r.epoch.Load()
	r.recMu.Lock()
	alone := r.calls[key] == 1
	r.recMu.Unlock()
	r.opMu.Lock()
	stopped := r.stopped
	r.opMu.Unlock()
	// The period lasted throughout, nobody else subscribed the name in
	// it, the form is the name's only one: the scope must keep it.
	rec.mustKeep = e1 == e2 && cur1 == p && alone && !derived && len(r.specsOf(sp.name)) == 1 && !stopped
	r.addRec(rec, rng)
	if derived {
		wait := rng.IntN(2) == 0
		r.readers.Go(func() {
			// Cancel the derived context at some point: at once, or when
			// its period or the run ends.
			if wait {
				select {
				case <-p.done:
				case <-r.phase2:
				}
			}
			before := r.before()
			r.recMu.Lock()
			rec.derivedCancelBefore = &before
			r.recMu.Unlock()
			cancelDerived()
		})
	}
}

// deriveCtx returns a context derived from parent, for a call the scope
// must not keep.
func deriveCtx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(parent)
}

func (r *scopeRun) specsOf(name string) []*spec {
	for _, forms := range r.specs {
		if forms[0].name == name {
			return forms
		}
	}
	if name == unbegunSpec.name {
		return []*spec{unbegunSpec}
	}
	return []*spec{soloSpec}
}

// addRec records rec and starts its reader.
func (r *scopeRun) addRec(rec *chanRec, rng *rand.Rand) {
	r.recMu.Lock()
	r.recs = append(r.recs, rec)
	r.recMu.Unlock()
	// The reader reads at once, slowly, only after a while (so that the
	// bus queues for it, then hands over what waited), or only once its
	// period ended or the run ends.
	mode, pause, stall := rng.IntN(4), rng.IntN(4), 20+rng.IntN(400)
	r.readers.Go(func() {
		switch mode {
		case 2:
			for i := 0; i < stall && !isDone(rec.p.done); i++ {
				runtime.Gosched()
			}
		case 3:
			select {
			case <-rec.p.done:
			case <-r.phase2:
			}
		}
		for {
			e, ok := rec.h.recv()
			if !ok {
				break
			}
			rec.got = append(rec.got, e.tag())
			for range pause * min(mode, 2) {
				runtime.Gosched()
			}
		}
		rec.closedAt = r.after()
		rec.closed.Store(true)
	})
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// unsubscribeOne unsubscribes a random channel handed out (not solo's).
func (r *scopeRun) unsubscribeOne(rng *rand.Rand) {
	r.recMu.Lock()
	if len(r.recs) == 0 {
		r.recMu.Unlock()
		return
	}
	rec := r.recs[rng.IntN(len(r.recs))]
	if rec.spec == soloSpec || rec.unsubbed {
		r.recMu.Unlock()
		return
	}
	rec.unsubbed = true
	rec.unsubBefore = r.before()
	rec.h.unsub()
	rec.unsubAfter = r.after()
	r.recMu.Unlock()
}

// finish ends everything but the bus: every context is cancelled and the
// scope closed; then every channel must close, without Stop.
func (r *scopeRun) finish() {
	r.opMu.Lock()
	p, before := r.leaveCurLocked(), r.before()
	r.sc.Close()
	r.endedLocked(p, before, r.after())
	r.closed, r.finished = true, true
	for _, p := range r.periods {
		r.cancelLocked(p)
	}
	r.opMu.Unlock()
	close(r.phase2)
	done := make(chan struct{})
	go func() { r.readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		var open []string
		r.recMu.Lock()
		for _, rec := range r.recs {
			if !rec.closed.Load() {
				open = append(open, fmt.Sprintf("%q form %d (kept %t, must keep %t, derived %t, unsubscribed %t; period current %t, ended %t, canceled %t)",
					rec.spec.name, rec.spec.variant, rec.kept, rec.mustKeep, rec.derived, rec.unsubbed, rec.p.current, rec.p.ended, rec.p.canceled))
			}
		}
		r.recMu.Unlock()
		r.fail("%d of %d channels not closed 20s after every context was done and the scope closed (stopped %t): %v",
			len(open), len(r.recs), r.stopped, open)
		r.b.Stop() // let the readers go
		<-done
		return
	}
	if live := r.b.Stats().Subscribers; len(live) != 0 {
		r.fail("%d subscriptions listed live once every context was done and the scope closed: %+v", len(live), live)
	}
}

// check runs the checker over what every reader got, once all is done.
func (r *scopeRun) check() {
	kept := map[string]*chanRec{}     // by name and period
	keptForm := map[string]*chanRec{} // by name
	for _, rec := range r.recs {
		r.checkEvents(rec)
		if rec.mustKeep && !rec.kept {
			r.fail("%q: the first call of the name in a period that lasted throughout, with its only form, was not kept", rec.spec.name)
		}
		if !rec.kept {
			continue
		}
		switch p := rec.p; {
		case rec.derived:
			r.fail("%q: a call with a derived context was kept", rec.spec.name)
		case !p.current:
			r.fail("%q: a call in a period that never began (Begin with a done context, or on a closed scope) was kept", rec.spec.name)
		case p.ended && p.endEpoch <= rec.startEpoch:
			r.fail("%q: a call that began after its period ended was kept", rec.spec.name)
		}
		key := fmt.Sprintf("%s/%p", rec.spec.name, rec.p)
		if other := kept[key]; other != nil {
			r.fail("%q: two channels kept in one period", rec.spec.name)
		}
		kept[key] = rec
		if first := keptForm[rec.spec.name]; first != nil && first.spec != rec.spec {
			r.fail("%q: kept in form %d and in form %d (another T or buffer)", rec.spec.name, first.spec.variant, rec.spec.variant)
		} else if first == nil {
			keptForm[rec.spec.name] = rec
		}
	}
	r.checkTotals()
}

// hardCeil returns, per publisher, the number from which rec must have
// got nothing: published after its Unsubscribe, Stop, or (kept) the end
// of its period returned.
func (r *scopeRun) hardCeil(rec *chanRec) snapshot {
	c := noCeil
	if rec.unsubbed {
		c = minSnap(c, rec.unsubAfter)
	}
	if r.stopped {
		c = minSnap(c, r.stopSnap[1])
	}
	if rec.kept && rec.p.ended {
		c = minSnap(c, rec.p.endAfter)
	}
	return c
}

// softCeil returns, per publisher, the number below which every publish
// after floorHi reached rec's route: taken before the first call that
// could end it began.
func (r *scopeRun) softCeil(rec *chanRec) snapshot {
	c := rec.closedAt
	if rec.unsubbed {
		c = minSnap(c, rec.unsubBefore)
	}
	if r.stopped {
		c = minSnap(c, r.stopSnap[0])
	}
	if p := rec.p; p.ended {
		c = minSnap(c, p.endBefore)
	}
	if rec.p.canceled {
		c = minSnap(c, rec.p.cancelBefore)
	}
	if rec.derivedCancelBefore != nil {
		c = minSnap(c, *rec.derivedCancelBefore)
	}
	return c
}

func (r *scopeRun) checkEvents(rec *chanRec) {
	name, hard := rec.spec.name, r.hardCeil(rec)
	last := [nPubs]int{-1, -1, -1, -1, -1, -1}
	lastVer := map[string]int{}
	for i, e := range rec.got {
		what := fmt.Sprintf("%q (kept %t, derived %t) event %d: %s from publisher %d #%d", name, rec.kept, rec.derived, i, e.typ, e.pub, e.n)
		switch {
		case rec.spec.types != nil && !slices.Contains(rec.spec.types, e.typ):
			r.fail("%s: a type it does not receive", what)
		case e.n < rec.floorLo[e.pub]:
			r.fail("%s: published before its Subscribe began (from #%d)", what, rec.floorLo[e.pub])
		case e.n <= last[e.pub]:
			r.fail("%s: after #%d: out of order or twice", what, last[e.pub])
		case e.n >= hard[e.pub]:
			r.fail("%s: published after its end returned (at #%d)", what, hard[e.pub])
		case e.ver != 0 && e.ver <= lastVer[e.typ]:
			r.fail("%s: state version %d after version %d", what, e.ver, lastVer[e.typ])
		}
		last[e.pub] = e.n
		if e.ver != 0 {
			lastVer[e.typ] = e.ver
		}
	}
}

// checkTotals checks Stats' Totals, name by name and type by type, against
// what the readers got and what was published while the channels lived.
func (r *scopeRun) checkTotals() {
	st := r.b.Stats()
	totals := map[string]busevents.SubscriberStats{}
	for _, s := range st.Totals {
		totals[s.Name] = s
	}
	type acc struct{ read, lower, upper, discard uint64 }
	sums := map[string]map[string]*acc{}
	for _, rec := range r.recs {
		byType := sums[rec.spec.name]
		if byType == nil {
			byType = map[string]*acc{}
			sums[rec.spec.name] = byType
		}
		get := func(typ string) *acc {
			if byType[typ] == nil {
				byType[typ] = &acc{}
			}
			return byType[typ]
		}
		for _, e := range rec.got {
			get(e.typ).read++
		}
		soft := r.softCeil(rec)
		for p := range nPubs {
			typ := pubType[p]
			if rec.spec.types != nil && !slices.Contains(rec.spec.types, typ) {
				continue
			}
			a := get(typ)
			a.upper += uint64(max(0, rec.closedAt[p]-rec.floorLo[p]))
			if p != repS && p != repST {
				a.lower += uint64(max(0, soft[p]-rec.floorHi[p]))
			}
			a.discard += uint64(rec.spec.buffer + 1)
		}
	}
	for name, byType := range sums {
		tot := totals[name]
		latest := r.specsOf(name)[0].latest
		for typ, a := range byType {
			d, dr, sk := tot.Delivered[typ], tot.Dropped[typ], tot.Skipped[typ]
			what := fmt.Sprintf("Totals[%s] for %s: Delivered %d, Dropped %d, Skipped %d; readers got %d", name, typ, d, dr, sk, a.read)
			switch {
			case !latest && d != a.read:
				r.fail("%s: Delivered is not what the readers got", what)
			case latest && (a.read+sk > d || d-a.read-sk > dr+a.discard):
				r.fail("%s: Delivered is not what the readers got plus Skipped, plus at most Dropped and what the ends discarded (%d)", what, a.discard)
			case !latest && d+dr > a.upper, latest && d > a.upper:
				r.fail("%s: more than the %d events published or replayed while its channels lived", what, a.upper)
			case d+dr < a.lower:
				r.fail("%s: Delivered+Dropped below the %d events published while its channels were surely routed", what, a.lower)
			}
		}
	}
}
