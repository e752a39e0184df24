package demo_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-dev/baton/internal/demo"
	"github.com/baton-dev/baton/internal/testseed"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunPasses runs the demo in a bubble, with the fake clock, through one
// failover of each kind, and checks that every check passed and that the
// report says what happened.
func TestRunPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		rep, err := demo.Run(context.Background(), options(func(o *demo.Options) {
			o.Replicas, o.Failovers, o.Seed, o.Dwell, o.Out = 3, 5, 7, 100*time.Millisecond, &out
		}))
		if err != nil {
			t.Fatal(err)
		}
		var summary bytes.Buffer
		if err := rep.WriteSummary(&summary); err != nil {
			t.Fatal(err)
		}
		if !rep.OK() {
			t.Fatalf("the demo failed:\n%s\n%s", out.String(), summary.String())
		}
		passed, total := rep.Checks()
		if passed != total || total < 5*10 {
			t.Errorf("%d/%d checks passed", passed, total)
		}
		var faults []demo.Fault
		for _, f := range rep.Failovers {
			faults = append(faults, f.Fault)
			if f.NewTerm <= f.OldTerm || f.To == "" || !f.Newest || !f.Fenced {
				t.Errorf("failover %d: %+v", f.N, f)
			}
			switch f.Fault {
			case demo.FaultRelease:
			case demo.FaultCrash:
				// The kubelet's report, not the lease, ends the wait.
				if f.Handover > 100*time.Millisecond || f.ReportAt.Before(f.FaultAt) || f.SinceReport < 0 || f.SinceReport > 100*time.Millisecond {
					t.Errorf("crash failover %d: handover %v, report %v after the crash, term %v after the report; want both at once",
						f.N, f.Handover, f.ReportAt.Sub(f.FaultAt), f.SinceReport)
				}
			default:
				if f.Handover < 500*time.Millisecond {
					t.Errorf("failover %d (%s): handover %v, want about a lease duration", f.N, f.Fault, f.Handover)
				}
			}
			if f.Fault == demo.FaultKill && f.SinceRenew < time.Second {
				t.Errorf("kill failover %d: taken %v after the last renew, before the lease of 1s expired", f.N, f.SinceRenew)
			}
		}
		slices.Sort(faults)
		if !slices.Equal(faults, []demo.Fault{demo.FaultCrash, demo.FaultHang, demo.FaultKill, demo.FaultPause, demo.FaultRelease}) {
			t.Errorf("faults %v, want one of each", faults)
		}
		// Exactly one failover (not the first) had an invalid document.
		invalid := 0
		for _, f := range rep.Failovers {
			if f.InvalidConfig {
				invalid++
				if f.N == 1 {
					t.Error("the first failover had the invalid document")
				}
			}
		}
		if invalid != 1 {
			t.Errorf("%d failovers with an invalid document, want 1", invalid)
		}
		for _, want := range []string{"became leader", "replayed its config state", "term", "ready", "first render of term", "lost leadership", "renew deadline missed", "failover 5/5",
			"will hang when term", "without \"stall\": unhealthy", "the kubelet stays silent", "kubelet: ", "container terminated", "death signal: ", "kubelet silent: the lease was taken"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("log lacks %q", want)
			}
		}
		wantChecks := map[demo.Fault][]string{
			demo.FaultHang:  {"stuck component reported", "stuck leader unhealthy", "stuck leader resigned", "unblocked replica healthy", "takeover as expected"},
			demo.FaultKill:  {"kubelet silent: lease waited out", "takeover as expected"},
			demo.FaultCrash: {"crash taken over before the lease expired", "term started at once after the kubelet's report", "takeover as expected"},
		}
		for _, f := range rep.Failovers {
			names := map[string]bool{}
			for _, c := range f.Checks {
				names[c.Name] = c.OK
			}
			for _, want := range wantChecks[f.Fault] {
				if ok, seen := names[want]; !seen || !ok {
					t.Errorf("%s failover: check %q seen %v, passed %v", f.Fault, want, seen, ok)
				}
			}
		}
		for _, want := range []string{"result: PASS", "crash, the kubelet reporting the container terminated: the next term started 0.0ms after the report",
			"kill, the kubelet silent: the lease was taken 1s after the old leader's last renew"} {
			if !strings.Contains(summary.String(), want) {
				t.Errorf("summary lacks %q:\n%s", want, summary.String())
			}
		}
		checkLogOrder(t, out.String())
		// A hang is reported from the term the fault hit, then the term the
		// stuck replica led again, which it handed over from.
		for _, f := range rep.Failovers {
			if f.Fault == demo.FaultHang {
				if f.FaultTerm == 0 || f.FaultTerm >= f.OldTerm {
					t.Errorf("hang failover: fault term %d, handed over from %d", f.FaultTerm, f.OldTerm)
				}
				if want := fmt.Sprintf("%d→%d", f.FaultTerm, f.OldTerm); !strings.Contains(summary.String(), want) {
					t.Errorf("summary lacks the hang's terms %q:\n%s", want, summary.String())
				}
			} else if f.FaultTerm != f.OldTerm {
				t.Errorf("%s failover: fault term %d, handed over from %d", f.Fault, f.FaultTerm, f.OldTerm)
			}
			// The crash says its kubelet is quicker than a real one.
			if f.Fault == demo.FaultCrash && !strings.Contains(out.String(), "this demo's kubelet reports at once") {
				t.Errorf("the crash step does not say that its kubelet reports at once, unlike a real one")
			}
		}
		checkPausesEnd(t, rep)
		// Terms: at least the first one and one per failover, each ended.
		if len(rep.Terms) < 4 {
			t.Errorf("%d terms recorded", len(rep.Terms))
		}
		for _, tr := range rep.Terms {
			if tr.End.IsZero() || tr.Sent.IsZero() || tr.End.Before(tr.Sent) {
				t.Errorf("term %d: sent %v end %v", tr.Term, tr.Sent, tr.End)
			}
		}

		var svg bytes.Buffer
		if err := rep.WriteSVG(&svg); err != nil {
			t.Fatal(err)
		}
		checkSVG(t, svg.Bytes(), len(rep.Terms))
		for _, tr := range rep.Terms {
			if !bytes.Contains(svg.Bytes(), fmt.Appendf(nil, ">t%d</text>", tr.Term)) {
				t.Errorf("timeline: term %d has no label", tr.Term)
			}
		}
	})
}

// checkLogOrder checks that every line of a term that a replica's runtime
// logs (replays, term ready, publishes) comes after that term's "became
// leader" line.
func checkLogOrder(t *testing.T, log string) {
	t.Helper()
	became := map[string]bool{}
	for _, line := range strings.Split(log, "\n") {
		i := strings.Index(line, "(term ")
		if i < 0 {
			continue
		}
		term := line[i : strings.IndexByte(line[i:], ')')+i+1]
		switch {
		case strings.Contains(line, " became leader "):
			if became[term] {
				t.Errorf("became leader twice %s: %s", term, line)
			}
			became[term] = true
		case strings.Contains(line, " replayed its ") || strings.Contains(line, " published "):
			if !became[term] {
				t.Errorf("a line of %s before its \"became leader\" line: %s", term, line)
			}
		}
	}
}

// checkPausesEnd checks that every pause of a finished run, of any replica,
// has its resume mark, so the timeline draws no pause to the end of the run.
func checkPausesEnd(t *testing.T, rep *demo.Report) {
	t.Helper()
	paused := map[string]int{}
	for _, m := range rep.Marks {
		switch m.Kind {
		case demo.MarkPause:
			paused[m.Replica]++
		case demo.MarkResume:
			paused[m.Replica]--
		}
	}
	for replica, n := range paused {
		if n != 0 {
			t.Errorf("%s: %d pause marks without a resume mark", replica, n)
		}
	}
	if len(paused) < 2 {
		t.Errorf("pauses of %d replicas marked, want the hang's of every replica", len(paused))
	}
}

// TestSeedRepeatsTheFirstLeader: runs of one seed start alike; baton-0
// leads first, whichever replica would win a race.
func TestSeedRepeatsTheFirstLeader(t *testing.T) {
	for range 3 {
		synctest.Test(t, func(t *testing.T) {
			rep, err := demo.Run(context.Background(), options(func(o *demo.Options) { o.Replicas, o.Failovers = 5, 0 }))
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() || len(rep.Terms) == 0 || rep.Terms[0].Replica != "baton-0" {
				t.Fatalf("OK=%v, terms %+v; want baton-0 to lead first", rep.OK(), rep.Terms)
			}
		})
	}
}

// checkSVG parses the timeline and counts its term bars.
func checkSVG(t *testing.T, b []byte, terms int) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	bars := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("timeline is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			for _, a := range se.Attr {
				if a.Name.Local == "rx" && a.Value == "3" {
					bars++
				}
			}
		}
	}
	if bars != terms {
		t.Errorf("timeline has %d term bars, want %d", bars, terms)
	}
}

// TestLiveView runs a short demo with the live view: frames are drawn in
// place with ANSI escapes and show the replicas.
func TestLiveView(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		rep, err := demo.Run(context.Background(), options(func(o *demo.Options) {
			o.Replicas, o.Failovers, o.Seed, o.Dwell, o.Out, o.Live = 2, 1, 3, 300*time.Millisecond, &out, true
		}))
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() {
			var s bytes.Buffer
			_ = rep.WriteSummary(&s)
			t.Fatalf("demo failed:\n%s", s.String())
		}
		s := out.String()
		if !strings.HasPrefix(s, "\x1b[H\x1b[2J") || strings.Count(s, "\x1b[H") < 3 {
			t.Errorf("no redrawn frames: %q", s[:min(len(s), 80)])
		}
		for _, want := range []string{"REPLICA", "baton-0", "baton-1", "leader", "follower", "CONFIG-PUBLISHER", "published  term", "recent"} {
			if !strings.Contains(s, want) {
				t.Errorf("live view lacks %q", want)
			}
		}
	})
}

// options returns DefaultOptions changed by set.
func options(set func(*demo.Options)) demo.Options {
	o := demo.DefaultOptions()
	set(&o)
	return o
}

// TestInterrupted: a run whose context ends stops early, says it was
// interrupted (not that a check failed), keeps the failovers done so far,
// and leaves nothing running.
func TestInterrupted(t *testing.T) {
	// Seed 1 begins with a hang: 4s cuts the run during it, 7s during the
	// second failover (a kill).
	for _, after := range []time.Duration{4 * time.Second, 7 * time.Second} {
		t.Run(after.String(), func(t *testing.T) { testInterrupted(t, after) })
	}
}

func testInterrupted(t *testing.T, after time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), after)
		defer cancel()
		var out bytes.Buffer
		rep, err := demo.Run(ctx, options(func(o *demo.Options) { o.Out = &out }))
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() || !rep.Interrupted || rep.Aborted != "" {
			t.Errorf("an interrupted run: OK=%v, Interrupted=%v, Aborted %q", rep.OK(), rep.Interrupted, rep.Aborted)
		}
		if len(rep.Failovers) == 0 || !rep.Failovers[len(rep.Failovers)-1].Interrupted {
			t.Fatalf("want the failover in progress marked interrupted, got %+v", rep.Failovers)
		}
		for _, f := range rep.Failovers[:len(rep.Failovers)-1] {
			if !f.OK() || f.Interrupted {
				t.Errorf("failover %d before the interruption: OK=%v Interrupted=%v", f.N, f.OK(), f.Interrupted)
			}
		}
		var summary bytes.Buffer
		if err := rep.WriteSummary(&summary); err != nil {
			t.Fatal(err)
		}
		s := summary.String()
		done := fmt.Sprintf("interrupted after %d of 6 failovers", len(rep.Failovers)-1)
		for _, want := range []string{"result: INTERRUPTED", done, " interrupted\n", "no two replicas led at once"} {
			if !strings.Contains(s, want) {
				t.Errorf("summary lacks %q:\n%s", want, s)
			}
		}
		if strings.Contains(s, "FAIL") {
			t.Errorf("an interrupted run reports a failure:\n%s", s)
		}
		if !strings.Contains(out.String(), "): interrupted") {
			t.Errorf("no failover line says interrupted:\n%s", out.String())
		}
	})
}

// TestOptionsOutOfRange: each option out of range is refused before
// anything starts, by an *OptionError naming the field; no zero value is
// taken for a default.
func TestOptionsOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		set   func(*demo.Options)
		field string
		other string
	}{
		{func(o *demo.Options) { o.Replicas = 0 }, "Replicas", ""},
		{func(o *demo.Options) { o.Replicas = 1 }, "Replicas", ""},
		{func(o *demo.Options) { o.Replicas = demo.MaxReplicas + 1 }, "Replicas", ""},
		{func(o *demo.Options) { o.Failovers = -1 }, "Failovers", ""},
		{func(o *demo.Options) { o.LeaseDuration = 0 }, "LeaseDuration", ""},
		{func(o *demo.Options) { o.LeaseDuration = 24 * time.Hour }, "LeaseDuration", ""},
		{func(o *demo.Options) { o.RetryPeriod = 0 }, "RetryPeriod", ""},
		{func(o *demo.Options) { o.Dwell = -time.Second }, "Dwell", ""},
		{func(o *demo.Options) { o.RefreshInterval = 0 }, "RefreshInterval", ""},
		{func(o *demo.Options) { o.RenewDeadline = 2 * time.Second }, "LeaseDuration", ""},
		{func(o *demo.Options) { o.RetryPeriod = 650 * time.Millisecond }, "RenewDeadline", ""},
	} {
		o := options(tc.set)
		_, err := demo.Run(context.Background(), o)
		var oe *demo.OptionError
		if !errors.Is(err, demo.ErrInvalidOptions) || !errors.As(err, &oe) {
			t.Errorf("%+v: Run = %v, want an *OptionError", o, err)
			continue
		}
		if oe.Field != tc.field || oe.Other != tc.other {
			t.Errorf("%v: names %q and %q, want %q and %q", err, oe.Field, oe.Other, tc.field, tc.other)
		}
	}
	// Zero failovers and zero dwell are runs, not defaults.
	if err := options(func(o *demo.Options) { o.Failovers, o.Dwell = 0, 0 }).Check(); err != nil {
		t.Errorf("0 failovers, 0 dwell: %v", err)
	}
	if err := demo.DefaultOptions().Check(); err != nil {
		t.Errorf("DefaultOptions: %v", err)
	}
}

// TestOptionErrorsAllNamed: several problems give one error each.
func TestOptionErrorsAllNamed(t *testing.T) {
	err := options(func(o *demo.Options) { o.Replicas, o.RenewDeadline, o.RetryPeriod = 1, 2*time.Second, 2*time.Second }).Check()
	for _, field := range []string{"Replicas 1", "LeaseDuration: lease duration 1s must be greater than renew deadline 2s", "RenewDeadline: renew deadline 2s must be greater than 1.2 × retry period 2s"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not say %q: %v", field, err)
		}
	}
}

// TestElectionDurationErrors: the election's own check judges the three
// durations; each problem it finds is an *OptionError naming the option,
// carrying the election's *k8sle.ConfigError; the demo's own lease limit is
// reported only when the election accepts the lease.
func TestElectionDurationErrors(t *testing.T) {
	for _, tc := range []struct {
		lease, renew, retry time.Duration
		fields              []string // Field of each *OptionError, in order
		election            int      // how many of them carry the election's error
	}{
		{0, 700 * time.Millisecond, 200 * time.Millisecond, []string{"LeaseDuration"}, 1},
		{time.Second, -time.Second, 200 * time.Millisecond, []string{"RenewDeadline"}, 1},
		{time.Second, 700 * time.Millisecond, 99 * time.Millisecond, []string{"RetryPeriod"}, 1},
		{1500 * time.Millisecond, 700 * time.Millisecond, 200 * time.Millisecond, []string{"LeaseDuration"}, 1},
		{time.Second, 2 * time.Second, 2 * time.Second, []string{"LeaseDuration", "RenewDeadline"}, 2},
		{2 * time.Minute, 700 * time.Millisecond, 200 * time.Millisecond, []string{"LeaseDuration"}, 0},
		{2 * time.Hour, 700 * time.Millisecond, 200 * time.Millisecond, []string{"LeaseDuration"}, 1},
	} {
		err := options(func(o *demo.Options) { o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = tc.lease, tc.renew, tc.retry }).Check()
		var fields []string
		election := 0
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			oe := e.(*demo.OptionError)
			fields = append(fields, oe.Field)
			var ce *k8sle.ConfigError
			if errors.As(oe, &ce) {
				election++
				if ce.Field != oe.Field || oe.Election != ce {
					t.Errorf("%v: the election's error names %q", oe, ce.Field)
				}
			}
		}
		if !slices.Equal(fields, tc.fields) || election != tc.election {
			t.Errorf("%v/%v/%v: fields %q (%d from the election), want %q (%d)\n%v", tc.lease, tc.renew, tc.retry, fields, election, tc.fields, tc.election, err)
		}
	}
}

// TestEstimate: the estimate given up front is within a quarter of the
// run's duration, measured in a bubble.
func TestEstimate(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		synctest.Test(t, func(t *testing.T) {
			o := options(func(o *demo.Options) { o.Seed = seed })
			rep, err := demo.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() {
				t.Fatalf("run failed")
			}
			est := o.Estimate()
			t.Logf("seed %d: estimate %v, run %v", seed, est, rep.Duration)
			if ratio := float64(rep.Duration) / float64(est); ratio < 0.75 || ratio > 1.25 {
				t.Errorf("seed %d: estimate %v, run took %v (ratio %.2f)", seed, est, rep.Duration, ratio)
			}
		})
	}
}

func TestSchedule(t *testing.T) {
	a, b := demo.Schedule(1, 11), demo.Schedule(1, 11)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different schedules: %v %v", a, b)
	}
	if slices.Equal(a, demo.Schedule(2, 11)) && slices.Equal(a, demo.Schedule(3, 11)) {
		t.Errorf("seeds 1, 2 and 3 give the same schedule %v", a)
	}
	for i := 0; i+5 <= len(a); i += 5 {
		cycle := slices.Clone(a[i : i+5])
		slices.Sort(cycle)
		if !slices.Equal(cycle, []demo.Fault{demo.FaultCrash, demo.FaultHang, demo.FaultKill, demo.FaultPause, demo.FaultRelease}) {
			t.Errorf("cycle %d is %v, want each fault once", i/5, a[i:i+5])
		}
	}
	for i := 1; i < len(a); i++ {
		if a[i] == a[i-1] {
			t.Errorf("fault %s twice in a row at %d: %v", a[i], i, a)
		}
	}
	if got := demo.Schedule(5, 2); len(got) != 2 {
		t.Errorf("Schedule(5, 2) = %v", got)
	}
}

func TestMux(t *testing.T) {
	var m demo.Mux
	m.Set("baton-0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "zero "+r.URL.Path) }))
	m.Set("baton-1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "one "+r.URL.Path) }))
	m.Set("baton-1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "one again "+r.URL.Path) }))
	srv := httptest.NewServer(&m)
	defer srv.Close()
	for path, want := range map[string]string{
		"/baton-0/metrics": "zero /metrics",
		"/baton-1/readyz":  "one again /readyz",
		"/":                `<a href="/baton-1/healthz">`,
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), want) {
			t.Errorf("GET %s = %q, want %q", path, body, want)
		}
	}
	resp, err := http.Get(srv.URL + "/baton-9/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown replica: %d", resp.StatusCode)
	}
}

func ExampleSchedule() {
	fmt.Println(demo.Schedule(1, 6))
	// Output:
	// [hang kill release pause crash kill]
}

// interruptSeeds are the seeds TestInterruptedAtRandomMoments runs in CI:
// each draws a run seed and the moment of the interruption.
var interruptSeeds = []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}

// freshSeedsEnv names how many seeds drawn from the clock
// TestInterruptedAtRandomMoments runs besides its fixed ones, for a soak;
// unset in CI, so that a run never depends on the day.
const freshSeedsEnv = "BATON_DEMO_FRESH_SEEDS"

// TestInterruptedAtRandomMoments: wherever Ctrl-C falls, the run reports
// INTERRUPTED and no failed check (or, if it came after the end, PASS). Each
// seed draws a run seed and a moment; BATON_SEED=N replays one seed, and
// BATON_DEMO_FRESH_SEEDS=N adds N seeds drawn from the clock.
func TestInterruptedAtRandomMoments(t *testing.T) {
	seeds := testseed.Seeds(t, interruptSeeds...)
	if s := os.Getenv(freshSeedsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			t.Fatalf("%s=%q: want a count of seeds", freshSeedsEnv, s)
		}
		for range n {
			seeds = append(seeds, rand.Uint64())
		}
	}
	total := demo.DefaultOptions().Estimate()
	for _, seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 0))
		runSeed := rng.Uint64N(1000)
		after := time.Duration(rng.Int64N(int64(total)))
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), after)
				defer cancel()
				rep, err := demo.Run(ctx, options(func(o *demo.Options) { o.Seed = runSeed }))
				if err != nil {
					t.Fatal(err)
				}
				var s bytes.Buffer
				if err := rep.WriteSummary(&s); err != nil {
					t.Fatal(err)
				}
				// A run that ended before the moment passed; one cut short
				// says so and reports no failure.
				if rep.Interrupted == rep.OK() || strings.Contains(s.String(), "FAIL") {
					t.Errorf("%s=%d: run seed %d interrupted after %v: Interrupted=%v OK=%v\n%s", testseed.Env, seed, runSeed, after, rep.Interrupted, rep.OK(), s.String())
				}
			})
		})
	}
}

func ExampleOptions_Check() {
	o := demo.DefaultOptions()
	o.Replicas, o.LeaseDuration = 1, 2*time.Minute
	for _, err := range o.Check().(interface{ Unwrap() []error }).Unwrap() {
		fmt.Println(err)
	}
	// Output:
	// demo: Replicas 1 is out of range: want 2 to 32 (a failover needs a second replica)
	// demo: LeaseDuration 2m0s is above 1m0s: each kill or pause waits the lease out
}

func ExampleOptions_Estimate() {
	o := demo.DefaultOptions()
	fmt.Println(demo.Schedule(o.Seed, o.Failovers), o.Estimate())
	// Output:
	// [hang kill release pause crash kill] 23.4s
}
