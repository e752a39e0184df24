package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/baton-dev/baton/internal/demo"
)

// demoFlags are the flags of `baton demo`.
type demoFlags struct {
	o        demo.Options
	timeline string
	metrics  string
	live     string
	logs     logFlags
	logFile  string
	fs       *flag.FlagSet // where the flags are registered (the names typed)
}

// demoFlagOf names the flag of each demo.Options field a flag sets, but
// for the election's durations, which demoTimingFlags names.
var demoFlagOf = map[string]string{
	"Replicas":  "--replicas",
	"Failovers": "--failovers",
	"Dwell":     "--dwell",
}

func (d *demoFlags) register(fs *flag.FlagSet) {
	d.o = demo.DefaultOptions()
	fs.IntVar(&d.o.Replicas, "replicas", d.o.Replicas, fmt.Sprintf("number of replicas, %d to %d", demo.MinReplicas, demo.MaxReplicas))
	fs.IntVar(&d.o.Failovers, "failovers", d.o.Failovers, "number of leader failures (kill, crash, pause, release, hang, in an order drawn from --seed); 0 elects a leader and stops")
	fs.DurationVar(&d.o.LeaseDuration, "lease-duration", d.o.LeaseDuration, fmt.Sprintf("lease duration, at most %v (a kill or a pause waits it out)", demo.MaxLeaseDuration))
	fs.DurationVar(&d.o.RenewDeadline, "renew-deadline", d.o.RenewDeadline, "renew deadline (below the lease duration)")
	fs.DurationVar(&d.o.RetryPeriod, "retry-period", d.o.RetryPeriod, "retry period (renew deadline above 1.2 × this)")
	fs.DurationVar(&d.o.Dwell, "dwell", d.o.Dwell, "how long each leader leads before it is failed; 0 for not at all")
	fs.Uint64Var(&d.o.Seed, "seed", d.o.Seed, "seed of the fault order and of the changes to the configuration and pods; baton-0 always leads first, and who wins each later race for the lease is up to timing")
	fs.StringVar(&d.timeline, "timeline", "", "write an SVG timeline of the terms, replays and faults to this file")
	fs.StringVar(&d.metrics, "metrics-addr", "", "serve each replica's /metrics, /healthz and /readyz under /<replica>/ on this address (e.g. 127.0.0.1:9090); off when empty")
	fs.StringVar(&d.live, "live", "auto", "redraw a live view in place: auto (when stdout is a terminal), always or never")
	fs.StringVar(&d.logFile, "log-file", "", "write the replicas' own logs to this file instead of stderr")
	d.logs.register(fs, "off")
	d.fs = fs
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: baton demo [flags]

Runs several replicas of the controller in one process on in-memory leases and
fails the leader again and again, checking every hand-over. With the defaults a
run takes about `+demo.DefaultOptions().Estimate().Round(time.Second).String()+`. Exits 0 if every check passed, 1 if one failed,
2 for bad flags, 130 when interrupted (the report of the run so far is printed;
under "go run" the go command reports "exit status 130" and exits 1 itself).

`)
		fs.PrintDefaults()
	}
}

// check reports every flag out of range, each naming its flag; the run
// does not start.
func (d *demoFlags) check(stdout io.Writer) []error {
	var errs []error
	timingFlag := timingBlame(d.fs, demoTimingFlags)
	if err := d.o.Check(); err != nil {
		for _, e := range unjoin(err) {
			var oe *demo.OptionError
			if errors.As(e, &oe) {
				e = errors.New(oe.Describe(func(field string) string { return cmp.Or(demoFlagOf[field], timingFlag(field)) }))
			}
			errs = append(errs, e)
		}
	}
	switch d.live {
	case "auto":
		d.o.Live = isTerminal(stdout)
	case "always":
		d.o.Live = true
	case "never":
	default:
		errs = append(errs, fmt.Errorf("--live %q: want auto, always or never", d.live))
	}
	if _, err := d.logs.logger(io.Discard); err != nil {
		errs = append(errs, err)
	}
	if d.metrics != "" {
		if _, _, err := net.SplitHostPort(d.metrics); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-addr %q: %w", d.metrics, err))
		}
	}
	return errs
}

func demoMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var d demoFlags
	d.register(fs)
	if code, done := parse(fs, args); done {
		return code
	}
	if errs := d.check(stdout); len(errs) > 0 {
		return usageErrors(stderr, "demo", errs)
	}
	// Everything the run writes to is opened before it starts.
	files, err := d.open(stderr)
	if err != nil {
		return usageErrors(stderr, "demo", []error{err})
	}
	defer files.close()
	logger, _ := d.logs.logger(files.log)
	// Some components log through the default logger; keep them off the view.
	useLogger(logger)
	d.o.Logger, d.o.Out = logger, stdout
	if d.metrics != "" {
		stop, err := serveDemoMetrics(&d, stdout, stderr)
		if err != nil {
			return usageErrors(stderr, "demo", []error{err})
		}
		defer stop()
	}
	return runDemo(ctx, &d, files, stdout, stderr)
}

// demoFiles are the files a demo run writes, opened before it starts.
type demoFiles struct {
	log      io.Writer
	logFile  *os.File // nil when logging to stderr
	timeline *os.File // nil without --timeline
}

func (d *demoFlags) open(stderr io.Writer) (*demoFiles, error) {
	f := &demoFiles{log: stderr}
	if d.logFile != "" {
		lf, err := os.Create(d.logFile)
		if err != nil {
			return nil, fmt.Errorf("--log-file: %w", err)
		}
		f.log, f.logFile = lf, lf
	}
	if d.timeline != "" {
		tf, err := os.Create(d.timeline)
		if err != nil {
			f.close()
			return nil, fmt.Errorf("--timeline: %w", err)
		}
		f.timeline = tf
	}
	return f, nil
}

func (f *demoFiles) close() {
	for _, c := range []*os.File{f.logFile, f.timeline} {
		if c != nil {
			_ = c.Close()
		}
	}
}

// serveDemoMetrics serves the replicas' handlers on --metrics-addr; stop
// shuts the server down and waits for it.
func serveDemoMetrics(d *demoFlags, stdout, stderr io.Writer) (stop func(), err error) {
	mux := &demo.Mux{}
	bound, stop, err := serveMetrics(d.metrics, mux, func(err error) { fmt.Fprintf(stderr, "baton demo: metrics server: %v\n", err) })
	if err != nil {
		return nil, err
	}
	if !d.o.Live {
		fmt.Fprintf(stdout, "serving the replicas' metrics on http://%s/\n", bound)
	}
	d.o.Metrics = mux
	return stop, nil
}

// runDemo runs the demo and reports it: the summary, the timeline, and the
// exit code (exitInterrupted when ctx ended first).
func runDemo(ctx context.Context, d *demoFlags, files *demoFiles, stdout, stderr io.Writer) int {
	rep, err := demo.Run(ctx, d.o)
	if err != nil {
		fmt.Fprintf(stderr, "baton demo: %v\n", err)
		return exitUsage
	}
	if err := rep.WriteSummary(stdout); err != nil {
		fmt.Fprintf(stderr, "baton demo: writing the summary: %v\n", err)
		return exitFailed
	}
	if files.timeline != nil {
		err := rep.WriteSVG(files.timeline)
		if cerr := files.timeline.Close(); err == nil {
			err = cerr
		}
		files.timeline = nil
		if err != nil {
			fmt.Fprintf(stderr, "baton demo: --timeline: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "timeline written to %s\n", d.timeline)
	}
	switch {
	case rep.Interrupted:
		fmt.Fprintln(stderr, "baton demo: interrupted")
		return exitInterrupted
	case !rep.OK():
		return exitFailed
	}
	return exitOK
}

// isTerminal reports whether w is a character device, as a terminal is.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
