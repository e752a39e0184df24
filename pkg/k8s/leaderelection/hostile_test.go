package leaderelection

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/internal/testseed"
)

// warnLog records the "lease value out of range" WARNs of every candidate. Safe for
// concurrent use.
type warnLog struct {
	mu     sync.Mutex
	warned map[string]bool // version/field
	values []string        // every warned field=value, to check each is out of range
}

func (w *warnLog) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnLog) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *warnLog) WithGroup(string) slog.Handler            { return w }

func (w *warnLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level != slog.LevelWarn || r.Message != "lease value out of range" {
		return nil
	}
	var field, version, value string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "field":
			field = a.Value.String()
		case "version":
			version = a.Value.String()
		case "value":
			value = a.Value.String()
		}
		return true
	})
	w.mu.Lock()
	w.warned[version+"/"+field] = true
	w.values = append(w.values, field+"="+value)
	w.mu.Unlock()
	return nil
}

// apiValidatingStore refuses, as the API server does, a write whose leaseTransitions
// is negative.
type apiValidatingStore struct{ *MemoryStore }

func (s apiValidatingStore) Create(ctx context.Context, r LeaseRecord) (LeaseRecord, error) {
	if r.LeaseTransitions < 0 {
		return LeaseRecord{}, fmt.Errorf("spec.leaseTransitions: Invalid value: %d: must be greater than or equal to 0", r.LeaseTransitions)
	}
	return s.MemoryStore.Create(ctx, r)
}

func (s apiValidatingStore) Update(ctx context.Context, r LeaseRecord) (LeaseRecord, error) {
	if r.LeaseTransitions < 0 {
		return LeaseRecord{}, fmt.Errorf("spec.leaseTransitions: Invalid value: %d: must be greater than or equal to 0", r.LeaseTransitions)
	}
	return s.MemoryStore.Update(ctx, r)
}

// hostileRecord draws a Lease record from the values a hostile or buggy writer might
// use, the extremes included, and returns the fields of it that are out of range.
func hostileRecord(rng *rand.Rand, now time.Time) (LeaseRecord, []string) {
	pick := func(n int) int { return rng.IntN(n) }
	durations := []time.Duration{0, -time.Second, time.Second, 3 * time.Second, 15 * time.Second, time.Hour,
		time.Hour + time.Second, math.MaxInt32 * time.Second, 1 << 62, math.MaxInt64}
	transitions := []int32{0, 1, 7, math.MaxInt32 - 1, math.MaxInt32, -1, math.MinInt32}
	holders := []string{"", "a", "b", "c", "intruder", strings.Repeat("x", 300)}
	r := LeaseRecord{
		HolderIdentity:   holders[pick(len(holders))],
		LeaseDuration:    durations[pick(len(durations))],
		AcquireTime:      now.Add(-time.Duration(rng.Int64N(int64(time.Hour)))),
		RenewTime:        now,
		LeaseTransitions: transitions[pick(len(transitions))],
	}
	switch pick(6) {
	case 0:
		r.Marker = "holder:" + r.HolderIdentity
	case 1:
		r.Marker = "holder:a"
	case 2:
		r.Marker = "release:" + strconv.FormatInt(int64(r.LeaseTransitions), 10) + ":x"
	case 3:
		r.Marker = "release:garbage"
	}
	if pick(3) == 0 {
		r.Strategy = "OldestEmulationVersion"
		r.PreferredHolder = []string{"a", "b", "ghost"}[pick(3)]
	}
	var bad []string
	if r.LeaseDuration > MaxLeaseDuration || r.LeaseDuration < 0 {
		bad = append(bad, "leaseDurationSeconds")
	}
	if r.LeaseTransitions < 0 || r.LeaseTransitions == math.MaxInt32 {
		bad = append(bad, "leaseTransitions")
	}
	return r, bad
}

// TestHostileRecords writes random Lease records (random field values, the extremes
// included: durations of 2^31−1 s and 2^62 ns, leaseTransitions at the int32 maximum
// and negative, forged markers and preferred holders) and deletes at random moments
// against three candidates, on a store that refuses a negative leaseTransitions as the
// API server does. It checks that no two candidates ever lead at once, that one leads
// within foreignLeaseFactor × MaxLeaseDuration + 2 × LeaseDuration after the hostile
// writes stop, and that every out-of-range value written was logged at WARN (and only
// out-of-range values were). BATON_SEED=N replays one seed.
func TestHostileRecords(t *testing.T) {
	for _, seed := range testseed.Seeds(t, 1, 2, 3, 4, 5, 6) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { hostileHistory(t, seed) })
		})
	}
}

func hostileHistory(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x4057))
	start := time.Now()
	mem := NewMemoryStore("lease")
	store := apiValidatingStore{mem}
	warns := &warnLog{warned: map[string]bool{}}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var electors []*Elector
	for _, id := range []string{"a", "b", "c"} {
		cfg := testConfig(id)
		tightConfig(&cfg)
		e, err := NewWithStore(cfg, store, Callbacks{}, slog.New(warns))
		if err != nil {
			t.Fatal(err)
		}
		electors = append(electors, e)
		wg.Go(func() {
			if err := e.Start(ctx); err != nil {
				t.Errorf("%s: Start: %v", id, err)
			}
		})
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	leaders := func() []string {
		var out []string
		for _, e := range electors {
			if e.IsLeader() {
				out = append(out, e.Identity())
			}
		}
		return out
	}
	// The poller looks every 10ms; hostile writes fall 5ms off its ticks, so that it
	// never looks while the candidates take in a write.
	done := make(chan struct{})
	var pollWG sync.WaitGroup
	pollWG.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if l := leaders(); len(l) > 1 {
				t.Errorf("%v after start: two leaders %v", time.Since(start), l)
			}
		}
	})
	defer func() {
		close(done)
		pollWG.Wait()
	}()

	type written struct {
		version string
		bad     []string
	}
	var writes []written
	time.Sleep(5 * time.Second)
	for range 20 + rng.IntN(40) {
		time.Sleep(time.Duration(1+rng.IntN(300))*10*time.Millisecond + 5*time.Millisecond)
		if rng.IntN(10) == 0 {
			mem.remove()
			continue
		}
		r, bad := hostileRecord(rng, time.Now())
		out := mem.set(r)
		writes = append(writes, written{out.ResourceVersion, bad})
		time.Sleep(time.Millisecond) // the candidates take the record in
	}
	stopped := time.Now()
	bound := foreignLeaseFactor*MaxLeaseDuration + 2*3*time.Second
	for len(leaders()) != 1 {
		if time.Since(stopped) > bound {
			rec, _ := mem.Get(context.Background())
			t.Fatalf("no leader %v after the hostile writes stopped (bound %v); lease %+v", time.Since(stopped), bound, rec)
		}
		time.Sleep(10 * time.Millisecond)
	}
	warns.mu.Lock()
	defer warns.mu.Unlock()
	for _, w := range writes {
		for _, field := range w.bad {
			if !warns.warned[w.version+"/"+field] {
				t.Errorf("record %s: out-of-range %s not logged at WARN", w.version, field)
			}
		}
	}
	for _, v := range warns.values {
		field, value, _ := strings.Cut(v, "=")
		switch field {
		case "leaseDurationSeconds":
			d, err := time.ParseDuration(value)
			if err != nil || (d <= MaxLeaseDuration && d >= 0) {
				t.Errorf("WARN for an in-range %s", v)
			}
		case "leaseTransitions":
			n, err := strconv.ParseInt(value, 10, 32)
			if err != nil || (n >= 0 && n < math.MaxInt32) {
				t.Errorf("WARN for an in-range %s", v)
			}
		}
	}
	var counted uint64
	for _, e := range electors {
		counted += e.Stats().OutOfRange
	}
	if counted < uint64(len(warns.warned)) {
		t.Errorf("Stats.OutOfRange sums to %d, fewer than the %d values warned", counted, len(warns.warned))
	}
}

// TestRecordDurationsBounded: the wait for a holder is bounded whatever duration its
// record gives, also one that overflows when tripled (2^62 ns and more, from a custom
// LeaseStore): a Baton holder at most MaxLeaseDuration, any other at most
// foreignLeaseFactor × MaxLeaseDuration; a negative duration is the configured one.
func TestRecordDurationsBounded(t *testing.T) {
	c := &campaign{e: &Elector{config: testConfig("a").withDefaults()}}
	for _, tc := range []struct {
		d     time.Duration
		baton bool
		want  time.Duration
	}{
		{1 << 62, false, foreignLeaseFactor * MaxLeaseDuration},
		{math.MaxInt64, false, foreignLeaseFactor * MaxLeaseDuration},
		{math.MaxInt32 * time.Second, true, MaxLeaseDuration},
		{1 << 62, true, MaxLeaseDuration},
		{-time.Second, false, foreignLeaseFactor * DefaultLeaseDuration},
		{20 * time.Second, false, foreignLeaseFactor * 20 * time.Second},
	} {
		r := LeaseRecord{HolderIdentity: "x", LeaseDuration: tc.d}
		if tc.baton {
			r.Marker = holderMarker("x")
		}
		if got := c.expiryWait(r); got != tc.want {
			t.Errorf("duration %v (Baton %v): wait %v, want %v", tc.d, tc.baton, got, tc.want)
		}
	}
}

// TestTransitionsNeverWrap: an acquisition counts a change of holder up to the int32
// maximum and never writes a negative leaseTransitions.
func TestTransitionsNeverWrap(t *testing.T) {
	c := &campaign{self: "a"}
	for _, tc := range []struct {
		holder  string
		t, want int32
	}{
		{"b", math.MaxInt32, math.MaxInt32},
		{"b", math.MaxInt32 - 1, math.MaxInt32},
		{"a", math.MaxInt32, math.MaxInt32},
		{"b", -5, 1},
		{"a", math.MinInt32, 0},
		{"b", 3, 4},
	} {
		if got := c.nextTransitions(LeaseRecord{HolderIdentity: tc.holder, LeaseTransitions: tc.t}); got != tc.want {
			t.Errorf("holder %q transitions %d: next %d, want %d", tc.holder, tc.t, got, tc.want)
		}
	}
}
