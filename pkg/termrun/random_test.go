package termrun_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/termctx"
	"github.com/baton-dev/baton/pkg/termrun"
)

// randomSeeds are the seeds CI runs; BATON_TERMRUN_SEEDS=N runs N fresh ones.
func randomSeeds(t *testing.T) []uint64 {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	if s := os.Getenv("BATON_TERMRUN_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("BATON_TERMRUN_SEEDS=%q: %v", s, err)
		}
		seeds = nil
		for range n {
			seeds = append(seeds, rand.Uint64())
		}
	}
	return seeds
}

// run is one run of a work, as the work saw it.
type run struct {
	start, end time.Time
	failed     bool
}

// TestRandomTerms runs a few works of random behaviour (runs of random length
// that fail, panic, return nil or run to the term's end; some overstay it) in a
// term of random length, and checks the policy against what happened: the runs
// of a work never overlap, a failed run is restarted exactly RestartDelay later
// while the term lasts, the term is given up at most once, exactly when the
// failure-streak rule first says so, and exactly the runs not returned
// OverstayAfter after the end are reported, once each.
func TestRandomTerms(t *testing.T) {
	var stepDowns, overstays, panics uint64
	for _, seed := range randomSeeds(t) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := randomTerm(t, seed)
				stepDowns, overstays, panics = stepDowns+st.StepDowns, overstays+st.Overstays, panics+st.Panicked
			})
		})
	}
	if stepDowns == 0 || overstays == 0 || panics == 0 {
		t.Errorf("the seeds gave %d step-downs, %d overstays, %d panics; want some of each", stepDowns, overstays, panics)
	}
}

func randomTerm(t *testing.T, seed uint64) termrun.Stats {
	rng := rand.New(rand.NewPCG(seed, 0))
	config := termrun.Config{
		RestartDelay:  time.Duration(1+rng.IntN(3)) * time.Second,
		StepDownGrace: time.Duration(2+rng.IntN(10)) * time.Second,
		OverstayAfter: time.Duration(1+rng.IntN(5)) * time.Second,
	}
	rec := &recorder{}
	r := newRunner(t, config, rec)
	ctx, cancel := context.WithCancel(termctx.With(context.Background(), term7))
	term := r.Term(ctx, rec.stepDown)
	begin := time.Now()
	// Off the millisecond grid of the runs, so that no run ends at the term's end.
	termLength := time.Duration(5+rng.IntN(60))*time.Second + 500*time.Microsecond

	const works = 3
	var mu sync.Mutex
	runs := make([][]run, works)
	for w := range works {
		wrng := rand.New(rand.NewPCG(seed, uint64(w+1)))
		term.Go(strconv.Itoa(w), func(ctx context.Context) error {
			mu.Lock()
			i := len(runs[w])
			runs[w] = append(runs[w], run{start: time.Now()})
			mu.Unlock()
			ret := func(err error) error {
				mu.Lock()
				runs[w][i].end, runs[w][i].failed = time.Now(), err != nil && ctx.Err() == nil
				mu.Unlock()
				return err
			}
			atEnd := func() error {
				if wrng.IntN(2) == 0 { // overstay, off the second grid of OverstayAfter
					time.Sleep(time.Duration(wrng.IntN(8))*time.Second + 250*time.Millisecond)
				}
				return ret(ctx.Err())
			}
			select {
			case <-ctx.Done():
				return atEnd()
			case <-time.After(time.Duration(wrng.IntN(4000)) * time.Millisecond):
			}
			switch wrng.IntN(10) {
			case 0:
				return ret(nil)
			case 1, 2:
				mu.Lock()
				runs[w][i].end, runs[w][i].failed = time.Now(), true
				mu.Unlock()
				panic("random panic")
			case 3, 4, 5, 6:
				return ret(errors.New("random failure"))
			}
			<-ctx.Done()
			return atEnd()
		})
	}
	time.Sleep(termLength)
	end := time.Now()
	cancel()
	term.Wait()
	checkRandomTerm(t, config, rec, runs, begin, end)
	return r.Stats()
}

func checkRandomTerm(t *testing.T, config termrun.Config, rec *recorder, runs [][]run, begin, end time.Time) {
	t.Helper()
	var wantStepDown time.Time
	wantOverstays := map[string]bool{}
	for w, rs := range runs {
		var streak time.Time
		for i, r := range rs {
			if r.end.IsZero() || r.end.Before(r.start) {
				t.Fatalf("work %d run %d: %+v not ended", w, i, r)
			}
			if i > 0 && r.start.Before(rs[i-1].end) {
				t.Errorf("work %d: run %d started before run %d ended", w, i, i-1)
			}
			if r.end.Sub(end) >= config.OverstayAfter {
				wantOverstays[strconv.Itoa(w)] = true
			}
			if !r.failed {
				if i+1 < len(rs) {
					t.Errorf("work %d: run %d ended cleanly and was run again", w, i)
				}
				continue
			}
			if i+1 < len(rs) && rs[i+1].start.Sub(r.end) != config.RestartDelay {
				t.Errorf("work %d: run %d restarted %v after the failure, want %v", w, i+1, rs[i+1].start.Sub(r.end), config.RestartDelay)
			}
			if i+1 == len(rs) && r.end.Add(config.RestartDelay).Before(end) {
				t.Errorf("work %d: run %d failed at +%v and was not restarted in the term", w, i, r.end.Sub(begin))
			}
			switch {
			case streak.IsZero() || r.end.Sub(r.start) >= config.StepDownGrace:
				streak = r.end
			case r.end.Sub(streak) >= config.StepDownGrace && (wantStepDown.IsZero() || r.end.Before(wantStepDown)):
				wantStepDown = r.end
			}
		}
	}
	_, at := rec.of(termrun.SteppedDown)
	switch {
	case len(rec.steps()) != len(at) || len(at) > 1:
		t.Errorf("%d step-downs, %d events; want at most one of each", len(rec.steps()), len(at))
	case wantStepDown.IsZero() != (len(at) == 0):
		t.Errorf("step-downs at %v, want one at %v (zero: none)", at, wantStepDown)
	case len(at) == 1 && !at[0].Equal(wantStepDown):
		t.Errorf("stepped down at +%v, want +%v", at[0].Sub(begin), wantStepDown.Sub(begin))
	}
	evs, _ := rec.of(termrun.Overstayed)
	got := map[string]bool{}
	for _, ev := range evs {
		if got[ev.Work] {
			t.Errorf("work %s reported overstaying twice", ev.Work)
		}
		got[ev.Work] = true
	}
	if len(got) != len(wantOverstays) {
		t.Errorf("overstays reported %v, want %v", got, wantOverstays)
	}
	for w := range wantOverstays {
		if !got[w] {
			t.Errorf("work %s overstayed unreported", w)
		}
	}
}
