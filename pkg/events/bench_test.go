package events_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

// The benchmarks measure what a user sees: every subscriber has a reader
// goroutine draining its channel, and the clock runs until the readers
// have received what was published. The publisher pauses every benchBatch
// events until the readers have caught up (on the clock), so that no
// buffer overflows: every figure is the cost of events delivered, not of
// events refused by a full buffer (the "dropped/op" metric shows that none
// were). Each Baton figure has its baselines beside it, measured in the
// same run under the same conditions.
const (
	benchBuffer = 1024
	benchBatch  = benchBuffer / 2
)

// readers drains channels, each counting what it received.
type readers struct {
	wg     sync.WaitGroup
	counts []paddedCount
}

type paddedCount struct {
	n atomic.Int64
	_ [56]byte // one cache line each, so that readers do not share one
}

func drainAll[T any](chans ...<-chan T) *readers {
	r := &readers{counts: make([]paddedCount, len(chans))}
	for i, ch := range chans {
		c := &r.counts[i].n
		r.wg.Go(func() {
			for range ch {
				c.Add(1)
			}
		})
	}
	return r
}

// loop runs publish b.N times, and every benchBatch times waits until each
// reader has received as many events as were published.
func (r *readers) loop(b *testing.B, publish func()) {
	b.ReportAllocs()
	sent := int64(0)
	for b.Loop() {
		publish()
		if sent++; sent%benchBatch == 0 {
			r.waitFor(sent)
		}
	}
	r.waitFor(sent)
}

func (r *readers) waitFor(n int64) {
	for i := range r.counts {
		for r.counts[i].n.Load() < n {
			runtime.Gosched()
		}
	}
}

// done waits for the readers, whose channels must have been closed, and
// reports the events that did not reach them, per operation.
func (r *readers) done(b *testing.B, perOp int) {
	r.wg.Wait()
	lost := int64(b.N * perOp)
	for i := range r.counts {
		lost -= r.counts[i].n.Load()
	}
	b.ReportMetric(float64(lost)/float64(b.N), "dropped/op")
}

// plainBus is the plainest fan-out: a mutex-guarded slice of buffered
// channels, sent to without blocking. It is the baseline of BenchmarkFanOut.
type plainBus struct {
	mu   sync.Mutex
	subs []chan busevents.Event
}

func (p *plainBus) publish(e busevents.Event) int {
	p.mu.Lock()
	n := 0
	for _, c := range p.subs {
		select {
		case c <- e:
			n++
		default:
		}
	}
	p.mu.Unlock()
	return n
}

// plainTypedBus is plainBus over channels of a concrete event type T: it
// asserts the event's Go type once per publish. It is the third contender
// of the typed case of BenchmarkCompareFanOut.
type plainTypedBus[T busevents.Event] struct {
	mu   sync.Mutex
	subs []chan T
}

func (p *plainTypedBus[T]) publish(e busevents.Event) int {
	v, ok := e.(T)
	if !ok {
		return 0
	}
	p.mu.Lock()
	n := 0
	for _, c := range p.subs {
		select {
		case c <- v:
			n++
		default:
		}
	}
	p.mu.Unlock()
	return n
}

// BenchmarkFanOut publishes one event type to n draining subscribers:
// Baton, the plain bus, and n bare channel sends (no lock, no routing).
func BenchmarkFanOut(b *testing.B) {
	for _, n := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("subscribers=%d/baton", n), func(b *testing.B) {
			bus := busevents.NewEventBus(0)
			var chans []<-chan busevents.Event
			for i := range n {
				chans = append(chans, subscribe(bus, fmt.Sprint("s", i), benchBuffer, busevents.Types("a")))
			}
			bus.Start()
			r := drainAll(chans...)
			e := newEv("a", 1)
			r.loop(b, func() { bus.Publish(e) })
			bus.Stop()
			r.done(b, n)
		})
		b.Run(fmt.Sprintf("subscribers=%d/plain-bus", n), func(b *testing.B) {
			p := &plainBus{}
			var chans []<-chan busevents.Event
			for range n {
				c := make(chan busevents.Event, benchBuffer)
				p.subs = append(p.subs, c)
				chans = append(chans, c)
			}
			r := drainAll(chans...)
			e := busevents.Event(newEv("a", 1))
			r.loop(b, func() { p.publish(e) })
			for _, c := range p.subs {
				close(c)
			}
			r.done(b, n)
		})
		b.Run(fmt.Sprintf("subscribers=%d/bare-sends", n), func(b *testing.B) {
			subs := make([]chan busevents.Event, n)
			var chans []<-chan busevents.Event
			for i := range subs {
				subs[i] = make(chan busevents.Event, benchBuffer)
				chans = append(chans, subs[i])
			}
			r := drainAll(chans...)
			e := busevents.Event(newEv("a", 1))
			r.loop(b, func() {
				for _, c := range subs {
					select {
					case c <- e:
					default:
					}
				}
			})
			for _, c := range subs {
				close(c)
			}
			r.done(b, n)
		})
	}
}

// BenchmarkLatestValue delivers state to one draining subscriber: a
// LatestValue subscription against a plain one.
func BenchmarkLatestValue(b *testing.B) {
	for _, latest := range []bool{false, true} {
		name := "plain"
		var opts []busevents.SubscribeOption
		if latest {
			name = "latest-value"
			opts = append(opts, busevents.LatestValue())
		}
		b.Run(name, func(b *testing.B) {
			bus := busevents.NewEventBus(0)
			ch := busevents.Subscribe[*ev](context.Background(), bus, "state", benchBuffer, append(opts, busevents.Types("config"))...)
			bus.Start()
			r := drainAll(ch)
			e := newEv("config", 1)
			r.loop(b, func() { bus.Publish(e) })
			bus.Stop()
			r.done(b, 1)
		})
	}
}

// BenchmarkLatestValueEviction publishes state to a LatestValue subscriber
// that never reads, so every publish finds its buffer full and evicts: the
// cost must not grow with the buffer, nor allocate.
func BenchmarkLatestValueEviction(b *testing.B) {
	for _, size := range []int{16, 4096} {
		b.Run(fmt.Sprintf("buffer=%d", size), func(b *testing.B) {
			bus := busevents.NewEventBus(0)
			subscribe(bus, "never-reads", size, busevents.Types("config", "noise"), busevents.LatestValue("config"))
			bus.Start()
			// Fill the channel and the overflow with noise, one config
			// version at the newest end.
			for i := range 2 * size {
				bus.Publish(newEv("noise", i))
			}
			e := newEv("config", 1)
			b.ReportAllocs()
			for b.Loop() {
				bus.Publish(e)
			}
			bus.Stop()
		})
	}
}

// BenchmarkPublishOneOfFiftyTypes has 50 subscribers on 50 distinct types
// and publishes one type: the cost should be that of one subscriber.
func BenchmarkPublishOneOfFiftyTypes(b *testing.B) {
	bus := busevents.NewEventBus(0)
	var chans []<-chan busevents.Event
	for i := range 50 {
		chans = append(chans, subscribe(bus, fmt.Sprint("s", i), benchBuffer, busevents.Types(fmt.Sprint("t", i))))
	}
	bus.Start()
	r := drainAll(chans[17])
	e := newEv("t17", 1)
	r.loop(b, func() { bus.Publish(e) })
	bus.Stop()
	r.done(b, 1)
}

// BenchmarkPublishNoReader publishes to a subscriber that never reads: the
// drop path.
func BenchmarkPublishNoReader(b *testing.B) {
	bus := busevents.NewEventBus(0)
	subscribe(bus, "never-reads", 16, busevents.Types("a"))
	bus.Start()
	e := newEv("a", 1)
	b.ReportAllocs()
	for b.Loop() {
		bus.Publish(e)
	}
	bus.Stop()
}

// BenchmarkPublishGenericSubscriber delivers to a Subscribe[T] channel of a
// concrete type, read by a draining reader.
func BenchmarkPublishGenericSubscriber(b *testing.B) {
	bus := busevents.NewEventBus(0)
	ch := busevents.Subscribe[*eventstest.Event](context.Background(), bus, "typed", benchBuffer)
	bus.Start()
	r := drainAll(ch)
	e := newEv("a", 1)
	r.loop(b, func() { bus.Publish(e) })
	bus.Stop()
	r.done(b, 1)
}

// variant is one contender of a comparison: how it publishes one event,
// and the readers of its subscribers, or else how to empty its channels
// off the clock.
type variant struct {
	name    string
	publish func()
	r       *readers
	drain   func()
	sent    int64
	turn    time.Duration // the last one
	elapsed time.Duration
	cpu     time.Duration
}

// compare runs the variants in turns of benchBatch events each, every turn
// timed until its readers received the batch, and reports each variant's
// time per event and the ratio of the first to each other: over the whole
// run ("baton/plain"), and the median over the rounds of the ratio of
// their turns in the round ("baton/plain-median"), which a turn slowed by
// another process on the machine moves less. Taking turns every few
// microseconds gives them the same machine: on a shared machine whose load
// changes from second to second, separate benchmarks would not. It also
// reports the CPU time the process spent per event in each variant's turns
// (publisher and readers, "-cpu-ns/event") and their ratio ("-cpu"): time
// the machine gave to other processes does not count there.
func compare(b *testing.B, vs ...*variant) {
	order := slices.Clone(vs)
	ratios := make([][]float64, len(vs)) // of vs[0] to vs[i], by round
	for i := 1; i < len(vs); i++ {
		ratios[i] = make([]float64, 0, b.N/benchBatch+1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += benchBatch {
		slices.Reverse(order) // neither always goes first
		for _, v := range order {
			cpu := cpuTime()
			start := time.Now()
			for range benchBatch {
				v.publish()
			}
			v.sent += benchBatch
			if v.r != nil {
				v.r.waitFor(v.sent)
			}
			v.turn = time.Since(start)
			v.elapsed += v.turn
			v.cpu += cpuTime() - cpu
			if v.drain != nil {
				v.drain()
			}
		}
		for i := 1; i < len(vs); i++ {
			ratios[i] = append(ratios[i], float64(vs[0].turn)/float64(vs[i].turn))
		}
	}
	b.StopTimer()
	for _, v := range vs {
		b.ReportMetric(float64(v.elapsed.Nanoseconds())/float64(v.sent), v.name+"-ns/event")
		b.ReportMetric(float64(v.cpu.Nanoseconds())/float64(v.sent), v.name+"-cpu-ns/event")
	}
	first := vs[0]
	for i, other := range vs[1:] {
		name := first.name + "/" + other.name
		b.ReportMetric(float64(first.elapsed)/float64(other.elapsed), name)
		slices.Sort(ratios[i+1])
		b.ReportMetric(ratios[i+1][len(ratios[i+1])/2], name+"-median")
		b.ReportMetric(float64(first.cpu)/float64(other.cpu), name+"-cpu")
	}
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCompareFanOut takes turns between Baton and the plain bus
// publishing one event type to n draining subscribers each. The allocs/op
// are Baton's: the plain bus allocates nothing. In the "typed" case
// Baton's subscribers subscribe with Subscribe[*Event] rather than on chan
// Event, so that a publish asserts the event's Go type first, and a
// channel carries a pointer rather than an interface; a third contender,
// the plain bus over chan *Event ("plain-typed"), shows what that alone is
// worth.
func BenchmarkCompareFanOut(b *testing.B) {
	for _, n := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			compareFanOut(b, n, func(bus *busevents.EventBus, name string) <-chan busevents.Event {
				return busevents.Subscribe[busevents.Event](context.Background(), bus, name, benchBuffer, busevents.Types("a"))
			})
		})
	}
	b.Run("typed-subscribers=50", func(b *testing.B) {
		compareFanOut(b, 50, func(bus *busevents.EventBus, name string) <-chan *ev {
			return busevents.Subscribe[*ev](context.Background(), bus, name, benchBuffer, busevents.Types("a"))
		})
	})
}

func compareFanOut[T busevents.Event](b *testing.B, n int, subscribe func(*busevents.EventBus, string) <-chan T) {
	bus := busevents.NewEventBus(0)
	p := &plainBus{}
	var batonChans []<-chan T
	var plainChans []<-chan busevents.Event
	for i := range n {
		batonChans = append(batonChans, subscribe(bus, fmt.Sprint("s", i)))
		c := make(chan busevents.Event, benchBuffer)
		p.subs = append(p.subs, c)
		plainChans = append(plainChans, c)
	}
	bus.Start()
	e := newEv("a", 1)
	baton := &variant{name: "baton", publish: func() { bus.Publish(e) }, r: drainAll(batonChans...)}
	plain := &variant{name: "plain", publish: func() { p.publish(e) }, r: drainAll(plainChans...)}
	vs := []*variant{baton, plain}
	pt := &plainTypedBus[T]{}
	if _, isEvent := any(batonChans[0]).(<-chan busevents.Event); !isEvent {
		var typedChans []<-chan T
		for range n {
			c := make(chan T, benchBuffer)
			pt.subs = append(pt.subs, c)
			typedChans = append(typedChans, c)
		}
		vs = append(vs, &variant{name: "plain-typed", publish: func() { pt.publish(e) }, r: drainAll(typedChans...)})
	}
	compare(b, vs...)
	bus.Stop()
	for _, c := range p.subs {
		close(c)
	}
	for _, c := range pt.subs {
		close(c)
	}
	for _, v := range vs {
		v.r.wg.Wait()
	}
}

// BenchmarkCompareNoiseFloor takes turns between two identical plain buses
// with 50 draining subscribers each, as BenchmarkCompareFanOut does with
// Baton and one: how far their ratio strays from 1 is how far the harness
// strays on this machine at the moment, the margin within which a ratio of
// BenchmarkCompareFanOut means nothing.
func BenchmarkCompareNoiseFloor(b *testing.B) {
	var vs []*variant
	var buses []*plainBus
	e := newEv("a", 1)
	for _, name := range []string{"plain", "plain2"} {
		p := &plainBus{}
		var chans []<-chan busevents.Event
		for range 50 {
			c := make(chan busevents.Event, benchBuffer)
			p.subs = append(p.subs, c)
			chans = append(chans, c)
		}
		buses = append(buses, p)
		vs = append(vs, &variant{name: name, publish: func() { p.publish(e) }, r: drainAll(chans...)})
	}
	compare(b, vs...)
	for i, p := range buses {
		for _, c := range p.subs {
			close(c)
		}
		vs[i].r.wg.Wait()
	}
}

// BenchmarkComparePublishCost is BenchmarkCompareFanOut with no reader
// running while the clock runs: each channel has room for the turn's
// events, and is emptied after the turn, off the clock. No send wakes a
// reader or contends with one for a channel's lock, so the figures are the
// cost of the publish path itself (the routing, the accounting, the sends
// into a buffer), without the scheduling that dominates a fan-out to
// draining readers.
//
// In the "typed" case Baton's subscribers subscribe with Subscribe[*Event],
// as in BenchmarkCompareFanOut.
func BenchmarkComparePublishCost(b *testing.B) {
	for _, n := range []int{1, 50} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			comparePublishCost(b, n, func(bus *busevents.EventBus, name string) <-chan busevents.Event {
				return busevents.Subscribe[busevents.Event](context.Background(), bus, name, benchBuffer, busevents.Types("a"))
			})
		})
	}
	b.Run("typed-subscribers=50", func(b *testing.B) {
		comparePublishCost(b, 50, func(bus *busevents.EventBus, name string) <-chan *ev {
			return busevents.Subscribe[*ev](context.Background(), bus, name, benchBuffer, busevents.Types("a"))
		})
	})
}

func comparePublishCost[T busevents.Event](b *testing.B, n int, subscribe func(*busevents.EventBus, string) <-chan T) {
	bus := busevents.NewEventBus(0)
	p := &plainBus{}
	var batonChans []<-chan T
	var plainChans []<-chan busevents.Event
	for i := range n {
		batonChans = append(batonChans, subscribe(bus, fmt.Sprint("s", i)))
		c := make(chan busevents.Event, benchBuffer)
		p.subs = append(p.subs, c)
		plainChans = append(plainChans, c)
	}
	bus.Start()
	e := newEv("a", 1)
	baton := &variant{name: "baton", publish: func() { bus.Publish(e) }, drain: func() { empty(batonChans) }}
	plain := &variant{name: "plain", publish: func() { p.publish(e) }, drain: func() { empty(plainChans) }}
	compare(b, baton, plain)
	if len(batonChans[0]) > 0 || len(plainChans[0]) > 0 {
		b.Fatal("events left in a channel")
	}
	bus.Stop()
}

// empty receives what each channel holds.
func empty[T any](chans []<-chan T) {
	for _, c := range chans {
		for len(c) > 0 {
			<-c
		}
	}
}

// BenchmarkCompareSend takes turns between a Baton publish to one draining
// subscriber and a bare non-blocking channel send to one draining reader.
func BenchmarkCompareSend(b *testing.B) {
	bus := busevents.NewEventBus(0)
	bch := subscribe(bus, "s", benchBuffer, busevents.Types("a"))
	bus.Start()
	ch := make(chan busevents.Event, benchBuffer)
	e := newEv("a", 1)
	var ee busevents.Event = e
	baton := &variant{name: "baton", publish: func() { bus.Publish(e) }, r: drainAll(bch)}
	send := &variant{name: "send", publish: func() {
		select {
		case ch <- ee:
		default:
		}
	}, r: drainAll[busevents.Event](ch)}
	compare(b, baton, send)
	bus.Stop()
	close(ch)
	baton.r.wg.Wait()
	send.r.wg.Wait()
}

// BenchmarkCompareLatestValue takes turns between a LatestValue
// subscription and a plain one, each with a draining reader, on one bus.
func BenchmarkCompareLatestValue(b *testing.B) {
	bus := busevents.NewEventBus(0)
	lch := busevents.Subscribe[*ev](context.Background(), bus, "latest", benchBuffer, busevents.Types("config"), busevents.LatestValue())
	pch := busevents.Subscribe[*ev](context.Background(), bus, "plain", benchBuffer, busevents.Types("pods"))
	bus.Start()
	config, pods := newEv("config", 1), newEv("pods", 1)
	latest := &variant{name: "latest", publish: func() { bus.Publish(config) }, r: drainAll(lch)}
	plain := &variant{name: "plain", publish: func() { bus.Publish(pods) }, r: drainAll(pch)}
	compare(b, latest, plain)
	bus.Stop()
	latest.r.wg.Wait()
	plain.r.wg.Wait()
}
