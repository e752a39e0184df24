package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// configs are the timings histories run with (one picked per seed): client-go's
// defaults, and a tight one.
var configs = []leaderelection.Config{
	{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
	{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond},
}

// leaderTarget makes a candidate fault hit whoever leads when it starts.
const leaderTarget = -1

// fault is one scheduled fault. Window faults (partition, pause, flaky, lag, api
// restart, candidate restart) last dur.
type fault struct {
	at     time.Duration
	kind   string
	target int // candidate index, or leaderTarget
	dur    time.Duration
	hang   bool      // partition: calls hang rather than fail fast
	flaky  flakiness // flaky window
	lag    time.Duration
	back   int           // restore: how many writes back
	after  time.Duration // delete after create: how long after the Create
	rate   float64       // skew: the rate of the candidate's clock
}

// flakyKind is the window of per-call faults (drop, delay, lost or late replies).
const flakyKind = "flaky calls"

func (f fault) String() string {
	target := fmt.Sprintf("c%d", f.target)
	if f.target == leaderTarget {
		target = "leader"
	}
	switch f.kind {
	case fPartition:
		return fmt.Sprintf("%v partition %s for %v (hang %v)", f.at, target, f.dur, f.hang)
	case fPause:
		return fmt.Sprintf("%v pause %s for %v", f.at, target, f.dur)
	case flakyKind:
		fl := f.flaky
		return fmt.Sprintf("%v flaky %s for %v (drop %.2f delay %.2f lose %.2f slow %.2f max %v)",
			f.at, target, f.dur, fl.dropRequest, fl.delayRequest, fl.loseReply, fl.delayReply, fl.maxDelay)
	case fWatchLagged:
		return fmt.Sprintf("%v watch lag %s for %v by %v", f.at, target, f.dur, f.lag)
	case fWatchClosed:
		return fmt.Sprintf("%v close watches of %s", f.at, target)
	case fAPIRestart:
		return fmt.Sprintf("%v restart api server, down %v", f.at, f.dur)
	case fRealAPIRestart:
		return fmt.Sprintf("%v stop kube-apiserver, start it %v later", f.at, f.dur)
	case fCandRestart:
		return fmt.Sprintf("%v restart %s, down %v", f.at, target, f.dur)
	case fRestore:
		return fmt.Sprintf("%v restore the snapshot %d writes back", f.at, f.back)
	case fDeleteAfterCreate:
		return fmt.Sprintf("%v delete the lease %v after the next Create", f.at, f.after)
	case fSkew:
		return fmt.Sprintf("%v clock of %s at rate %.3f for %v", f.at, target, f.rate, f.dur)
	case fStaleReport:
		return fmt.Sprintf("%v stale status of %s's pod", f.at, target)
	case fForceDelete:
		return fmt.Sprintf("%v force-delete %s's pod", f.at, target)
	case fPodWatchBroken:
		return fmt.Sprintf("%v break %s's pod watches for %v", f.at, target, f.dur)
	default:
		return fmt.Sprintf("%v %s", f.at, f.kind)
	}
}

// weight is the relative frequency of a fault kind.
type weight struct {
	kind   string
	weight int
}

// memoryWeights are the frequencies of the fault kinds on the in-memory server: all.
var memoryWeights = []weight{
	{flakyKind, 4}, {fPartition, 4}, {fPause, 2}, {fWatchClosed, 2}, {fWatchLagged, 1},
	{fGone, 1}, {fLeaseDeleted, 3}, {fRestore, 1}, {fAPIRestart, 1}, {fCandRestart, 2},
}

// kubeletWeights are the frequencies of the fault kinds of the kubelet histories:
// those of the in-memory server, restarts (which the kubelet model reports) more often,
// stale statuses, force deletes and broken pod watches.
var kubeletWeights = []weight{
	{flakyKind, 4}, {fPartition, 4}, {fPause, 2}, {fWatchClosed, 2}, {fWatchLagged, 2},
	{fGone, 1}, {fLeaseDeleted, 2}, {fRestore, 1}, {fAPIRestart, 1}, {fCandRestart, 8},
	{fStaleReport, 3}, {fForceDelete, 2}, {fPodWatchBroken, 2},
}

// kubeletOpts are the schedules of the kubelet histories: candidates release the lease
// on a stop in one in four (the others crash).
var kubeletOpts = scheduleOpts{configs: configs, weights: kubeletWeights, phaseMin: 3, phaseMax: 8, faultMin: 6, faultMax: 18, kube: true}

// schedule is the random fault plan of one history.
type schedule struct {
	cfg     leaderelection.Config
	n       int    // candidates
	release []bool // ReleaseOnCancel per candidate
	faults  []fault
	heal    time.Duration // every fault is over
	skew    skewMode      // on: the candidates run on skewable clocks
}

// createRaceWeights are the frequencies of the fault kinds of the create-race
// histories: the lease deleted by hand (often right after a Create), so that several
// candidates wait out the same absence and Create at about the same moment, with
// lagging watches and slow requests, so that a Create's answer can come before the
// watch showed the Creates and deletes around it.
var createRaceWeights = []weight{
	{fDeleteAfterCreate, 4}, {fLeaseDeleted, 3}, {fWatchLagged, 4}, {flakyKind, 2}, {fPartition, 1},
}

// createRaceOpts are the schedules of the create-race histories.
var createRaceOpts = scheduleOpts{configs: configs, weights: createRaceWeights, phaseMin: 3, phaseMax: 8, faultMin: 6, faultMax: 16, cands: 3}

// scheduleOpts shape the schedules of one world.
type scheduleOpts struct {
	configs  []leaderelection.Config
	weights  []weight
	phaseMin int // the faults start within phaseMin to phaseMax lease durations
	phaseMax int
	faultMin int // faultMin to faultMax faults
	faultMax int
	cands    int      // 0: 3 to 5
	skew     skewMode // on: add 0 to 2 clock skew windows (drawn after the other faults)
	kube     bool     // the kubelet model's histories: release in one in four
}

// memoryOpts are the schedules of the in-memory histories.
var memoryOpts = scheduleOpts{configs: configs, weights: memoryWeights, phaseMin: 3, phaseMax: 8, faultMin: 4, faultMax: 15}

// newSchedule draws a plan from rng: 3 to 5 candidates, faults of o's kinds spread
// over o's phase, half of the candidate faults aimed at the leader of the moment.
func newSchedule(rng *rand.Rand, o scheduleOpts) schedule {
	cfg := o.configs[rng.IntN(len(o.configs))]
	s := schedule{cfg: cfg, n: 3 + rng.IntN(3)}
	if o.cands > 0 {
		s.n = o.cands
	}
	for range s.n {
		if o.kube {
			s.release = append(s.release, rng.IntN(4) == 0)
		} else {
			s.release = append(s.release, rng.IntN(2) == 0)
		}
	}
	ld, rp := cfg.LeaseDuration, cfg.RetryPeriod
	span := func(lo, hi float64) time.Duration {
		return time.Duration((lo + rng.Float64()*(hi-lo)) * float64(ld))
	}
	phase := time.Duration(o.phaseMin+rng.IntN(o.phaseMax-o.phaseMin+1)) * ld
	total := 0
	for _, w := range o.weights {
		total += w.weight
	}
	for range o.faultMin + rng.IntN(o.faultMax-o.faultMin+1) {
		f := fault{at: time.Duration(rng.Int64N(int64(phase))), target: rng.IntN(s.n)}
		if rng.IntN(2) == 0 {
			f.target = leaderTarget
		}
		pick := rng.IntN(total)
		for _, w := range o.weights {
			if pick -= w.weight; pick < 0 {
				f.kind = w.kind
				break
			}
		}
		switch f.kind {
		case flakyKind:
			f.dur = span(0.2, 2)
			f.flaky = flakiness{
				dropRequest:  rng.Float64() * 0.3,
				delayRequest: rng.Float64() * 0.3,
				loseReply:    rng.Float64() * 0.6,
				delayReply:   rng.Float64() * 0.3,
				maxDelay:     time.Duration(rng.Float64() * 1.5 * float64(rp)),
			}
		case fPartition:
			f.dur, f.hang = span(0.1, 1.5), rng.IntN(2) == 0
		case fPause:
			f.dur = span(0.1, 1.5)
		case fWatchLagged:
			// Up to 3 RetryPeriods: a steady lag above a RetryPeriod must not stall the
			// elector after a conflict (issue 25, defect 9).
			f.dur, f.lag = span(0.2, 1.5), time.Duration(rng.Float64()*3*float64(rp))
		case fAPIRestart:
			f.dur = span(0.02, 0.5)
		case fCandRestart:
			f.dur = span(0, 1)
		case fPodWatchBroken:
			f.dur = span(0.1, 1.5)
		case fRestore:
			f.back = 1 + rng.IntN(6)
		case fDeleteAfterCreate:
			f.after = time.Duration(rng.Float64() * float64(rp) / 4)
		}
		s.faults = append(s.faults, f)
		s.heal = max(s.heal, f.at+f.dur)
	}
	if o.skew.on {
		s.skew = o.skew
		s.addSkew(rng, phase)
	}
	slices.SortStableFunc(s.faults, func(a, b fault) int { return int(a.at - b.at) })
	return s
}

// addSkew adds 0 to 2 clock skew windows. They are drawn after the other faults, so
// a seed keeps the faults it had before skew was injected.
func (s *schedule) addSkew(rng *rand.Rand, phase time.Duration) {
	for range rng.IntN(3) {
		f := fault{at: time.Duration(rng.Int64N(int64(phase))), kind: fSkew, target: rng.IntN(s.n)}
		if rng.IntN(2) == 0 {
			f.target = leaderTarget
		}
		ld := float64(s.cfg.LeaseDuration)
		f.dur = time.Duration((0.5 + rng.Float64()*2.5) * ld)
		// Within the elector's tolerance ε (0.2 for both configs): 1−ε to 1+ε, so two
		// clocks differ in rate by up to LeaseDuration/RenewDeadline, the bound itself.
		eps := s.cfg.ClockTolerance()
		f.rate = 1 - eps + rng.Float64()*2*eps
		if r := s.skew.rate; r > 0 {
			f.rate = r
		}
		s.faults = append(s.faults, f)
		s.heal = max(s.heal, f.at+f.dur)
	}
}

func (s schedule) lines() []string {
	out := make([]string, len(s.faults))
	for i, f := range s.faults {
		out[i] = f.String()
	}
	return out
}
