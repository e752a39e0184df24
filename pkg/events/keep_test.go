package events_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

func drainRouted(ch <-chan *routed) []int {
	var out []int
	for _, e := range eventstest.Drain(ch) {
		out = append(out, e.v)
	}
	return out
}

// TestKeptPausedGetsNothingStale: a kept subscription receives nothing
// while paused, and after Resume only what was published after it: what
// was left unread from before the pause is gone too. A replay after Resume
// reaches it although it had been given newer state of the type before
// the pause.
func TestKeptPausedGetsNothingStale(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	b.Start()
	k, err := busevents.Keep[*routed](b, "kept", 4, busevents.LeaderOnly())
	if err != nil {
		t.Fatal(err)
	}
	ch := k.C()
	b.Publish(&routed{v: 1}) // made paused: not routed yet
	if !k.Resume() {
		t.Fatal("Resume on a live bus reported false")
	}
	seq := b.NextSequence()
	replayed := &routed{v: 2}
	b.Publish(replayed)
	b.Publish(&routed{v: 3}) // left unread
	k.Pause()
	b.Publish(&routed{v: 4}) // while paused
	k.Pause()                // again: nothing
	if !k.Resume() || !k.Resume() {
		t.Fatal("Resume reported false")
	}
	if n := b.Republish(replayed, seq); n != 1 {
		t.Fatalf("replay after Resume queued for %d subscribers, want 1", n)
	}
	b.Publish(&routed{v: 5})
	if got := drainRouted(ch); !slices.Equal(got, []int{2, 5}) {
		t.Fatalf("after Resume read %v, want [2 5]: nothing from before it", got)
	}
	k.Close()
	k.Close()
	if _, open := <-ch; open {
		t.Fatal("channel open after Close")
	}
	if k.Resume() {
		t.Fatal("Resume after Close reported true")
	}
}

// TestKeptStats: a paused subscription is not listed live; its counters
// stay in Totals, which only grow across periods.
func TestKeptStats(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	b.Start()
	k, _ := busevents.Keep[*routed](b, "kept", 1, busevents.Critical(nil), busevents.LeaderOnly())
	for period := 1; period <= 3; period++ {
		k.Resume()
		b.Publish(&routed{v: 1})
		b.Publish(&routed{v: 2}) // buffer full: dropped
		live := b.Stats()
		if len(live.Subscribers) != 1 || live.Subscribers[0].Delivered["routed"] != 1 || live.Subscribers[0].Dropped["routed"] != 1 {
			t.Fatalf("period %d: live stats %+v, want this period's 1 delivered, 1 dropped", period, live.Subscribers)
		}
		k.Pause()
		st := b.Stats()
		if len(st.Subscribers) != 0 {
			t.Fatalf("period %d: paused subscription listed live: %+v", period, st.Subscribers)
		}
		tot := st.Totals[0]
		if tot.Delivered["routed"] != uint64(period) || tot.Dropped["routed"] != uint64(period) || !tot.Critical {
			t.Fatalf("period %d: totals %+v, want %d delivered and dropped, critical", period, tot, period)
		}
	}
	k.Close()
	if tot := b.Stats().Totals[0]; tot.Delivered["routed"] != 3 {
		t.Fatalf("after Close totals %+v: counted again or lost", tot)
	}
}

// TestKeptStop: Stop closes a routed kept subscription's channel, and a
// paused one's at its next Resume or Close; never twice.
func TestKeptStop(t *testing.T) {
	for _, routedAtStop := range []bool{false, true} {
		t.Run(fmt.Sprintf("routed=%t", routedAtStop), func(t *testing.T) {
			b := eventstest.NewBus(t, 0)
			b.Start()
			k, _ := busevents.Keep[*routed](b, "kept", 1, busevents.LeaderOnly())
			k.Resume()
			if !routedAtStop {
				k.Pause()
			}
			b.Stop()
			if routedAtStop {
				if _, open := <-k.C(); open {
					t.Fatal("routed channel open after Stop")
				}
				k.Pause()
			}
			if k.Resume() {
				t.Fatal("Resume after Stop reported true")
			}
			if _, open := <-k.C(); open {
				t.Fatal("channel open after Resume on a stopped bus")
			}
			k.Close() // must not close it again
		})
	}
}

func TestKeepRefuses(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	cases := map[string]func() error{
		"every type":  func() error { _, err := busevents.Keep[busevents.Event](b, "x", 1); return err },
		"empty name":  func() error { _, err := busevents.Keep[*routed](b, "", 1); return err },
		"nil bus":     func() error { _, err := busevents.Keep[*routed](nil, "x", 1); return err },
		"zero buffer": func() error { _, err := busevents.Keep[*routed](b, "x", 0); return err },
	}
	for name, f := range cases {
		if err := f(); !errors.Is(err, busevents.ErrInvalidSubscription) {
			t.Errorf("%s: %v, want ErrInvalidSubscription", name, err)
		}
	}
}

// TestKeptLatestValueQueueIsEmptied: a LatestValue kept subscription whose
// reader fell behind has events waiting in the bus's queue (and its mover
// may hold one) when it is paused; Resume discards them with the channel,
// so the next period reads only what is published in it. Its skipped
// counters are counted once, in Totals.
func TestKeptLatestValueQueueIsEmptied(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	b.Start()
	k, err := busevents.Keep[busevents.Event](b, "kept", 2, busevents.Types("a", "b"), busevents.LatestValue("a"), busevents.LeaderOnly())
	if err != nil {
		t.Fatal(err)
	}
	for period := 1; period <= 3; period++ {
		if !k.Resume() {
			t.Fatal("Resume reported false")
		}
		base := period * 100
		for v := range 10 { // more than the buffer: the rest waits in the queue
			b.Publish(newEv("a", base+v))
			b.Publish(newEv("b", base+v))
		}
		k.Pause()
		b.Publish(newEv("a", -1)) // paused: never read
		if !k.Resume() {
			t.Fatal("Resume reported false")
		}
		b.Publish(newEv("a", base+50))
		got := values(eventstest.Drain(k.C()))
		if !slices.Equal(got, []int{base + 50}) {
			t.Fatalf("period %d: read %v after Resume, want only [%d]", period, got, base+50)
		}
		k.Pause()
	}
	tot := b.Stats().Totals[0]
	k.Close()
	if again := b.Stats().Totals[0]; again.Skipped["a"] != tot.Skipped["a"] || tot.Skipped["a"] == 0 {
		t.Fatalf("skipped: %d before Close, %d after; want equal and not zero", tot.Skipped["a"], again.Skipped["a"])
	}
	if _, open := <-k.C(); open {
		t.Fatal("channel open after Close")
	}
}

// TestKeptUnsubscribed: an Unsubscribe of a kept channel ends the
// subscription; Resume then reports false, and Pause and Close do nothing
// more.
func TestKeptUnsubscribed(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	b.Start()
	for _, pauseFirst := range []bool{false, true} {
		k, _ := busevents.Keep[*routed](b, "kept", 1, busevents.LeaderOnly())
		k.Resume()
		busevents.Unsubscribe(b, k.C())
		if pauseFirst {
			k.Pause()
		}
		if k.Resume() {
			t.Fatalf("pause first %t: Resume after Unsubscribe reported true", pauseFirst)
		}
		k.Pause()
		k.Close()
		if _, open := <-k.C(); open {
			t.Fatal("channel open after Unsubscribe")
		}
	}
}

// TestKeptResumeDuringADropReport: a delivery that let go of its topic's
// lock to report a drop may still hold the routes of a paused kept
// subscription when it is resumed; Resume then gives it new routes rather
// than reuse the old ones, and the subscription (a LatestValue one, whose
// mover runs) works on, its channel closed once by Close, no goroutine
// left behind.
func TestKeptResumeDuringADropReport(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	b.Start()
	reporting, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	// Routed before the kept one: a delivery reports its drop, then goes on
	// to the kept subscription's route.
	full := busevents.Subscribe[*routed](t.Context(), b, "full", 3, busevents.LeaderOnly(), busevents.Critical(func(busevents.Drop) {
		once.Do(func() { close(reporting); <-release })
	}))
	k, err := busevents.Keep[*routed](b, "kept", 2, busevents.LatestValue(), busevents.LeaderOnly())
	if err != nil {
		t.Fatal(err)
	}
	k.Resume()
	published := make(chan struct{})
	go func() {
		for v := range 7 { // the kept one's mover starts at 2; "full" drops 3
			b.Publish(&routed{v: v})
		}
		close(published)
	}()
	<-reporting // the delivery of 3 let go of the topic's lock, holding the kept route
	k.Pause()
	if !k.Resume() {
		t.Fatal("Resume reported false")
	}
	close(release)
	<-published
	eventstest.Drain(full)
	b.Publish(&routed{v: 7})
	var got []int
	for timeout := time.After(10 * time.Second); !slices.Contains(got, 7); {
		select {
		case e := <-k.C():
			got = append(got, e.v)
		case <-timeout:
			t.Fatalf("after Resume read %v, and no 7", got)
		}
	}
	if slices.ContainsFunc(got, func(v int) bool { return v <= 3 }) {
		t.Fatalf("after Resume read %v: an event published before it (up to 3, whose delivery spanned the pause) leaked into the new period", got)
	}
	k.Close()
	if _, open := <-k.C(); open {
		t.Fatal("channel open after Close")
	}
}

// TestKeptPeriodAllocatesNothing guards the point of Kept: a period (Resume
// and Pause) of a subscription to two types costs no allocation once the
// bus knows the types.
func TestKeptPeriodAllocatesNothing(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	b.Start()
	k, _ := busevents.Keep[busevents.Event](b, "kept", 4, busevents.Types("a", "b"), busevents.LeaderOnly())
	b.Publish(newEv("a", 1))
	k.Resume()
	k.Pause()
	if n := testing.AllocsPerRun(100, func() {
		k.Resume()
		b.Publish(newEv("a", 1))
		k.Pause()
	}); n > 1 { // the event published
		t.Fatalf("a period of a kept subscription allocates %.1f times, want at most 1 (the event)", n)
	}
}

// TestKeptRandomized pauses and resumes a kept subscription at random while
// publishers publish numbered events of two types, and checks what its
// reader reads: after each Resume, only events published after that Resume
// began (each publisher's own order kept), none twice. A failure names its
// seed; BATON_SEED=<seed> replays the schedule of pauses.
func TestKeptRandomized(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4}
	if s := os.Getenv("BATON_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("BATON_SEED: %v", err)
		}
		seeds = []uint64{v}
	}
	for _, seed := range seeds {
		for _, latest := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed=%d,latest=%t", seed, latest), func(t *testing.T) { keptRandom(t, seed, latest) })
		}
	}
}

func keptRandom(t *testing.T, seed uint64, latest bool) {
	rng := rand.New(rand.NewPCG(seed, 0x6e97))
	b := eventstest.NewBus(t, 0)
	b.Start()
	opts := []busevents.SubscribeOption{busevents.Types("a", "b"), busevents.LeaderOnly()}
	if latest {
		opts = append(opts, busevents.LatestValue("a"))
	}
	k, _ := busevents.Keep[busevents.Event](b, "kept", 1+rng.IntN(8), opts...)
	var (
		mu   sync.Mutex
		next = map[string]int{} // next number each publisher publishes
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, typ := range []string{"a", "b"} {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Published under mu, so that a number below the floor
				// read under mu was published before it was read.
				mu.Lock()
				b.Publish(newEv(typ, next[typ]))
				next[typ]++
				mu.Unlock()
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for period := range 200 {
		mu.Lock()
		floor := maps2(next) // published from here on is fair game
		mu.Unlock()
		k.Resume()
		last := map[string]int{"a": -1, "b": -1}
		for range rng.IntN(50) {
			select {
			case e := <-k.C():
				x := e.(*ev)
				if x.Value < floor[x.Type] || x.Value <= last[x.Type] {
					t.Fatalf("seed %d period %d: read %s#%d; published since Resume: from #%d, last read #%d",
						seed, period, x.Type, x.Value, floor[x.Type], last[x.Type])
				}
				last[x.Type] = x.Value
			default:
			}
		}
		k.Pause()
	}
	k.Close()
}

func maps2(m map[string]int) map[string]int {
	c := make(map[string]int, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
