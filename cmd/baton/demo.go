package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/baton-dev/baton/internal/demo"
)

func demoMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o        demo.Options
		seed     int64
		timeline string
		metrics  string
		live     string
		logs     logFlags
		logFile  string
	)
	fs.IntVar(&o.Replicas, "replicas", demo.DefaultReplicas, "number of replicas (at least 2)")
	fs.IntVar(&o.Failovers, "failovers", demo.DefaultFailovers, "number of leader failures (kill, pause, release, in an order drawn from --seed)")
	fs.DurationVar(&o.LeaseDuration, "lease-duration", demo.DefaultLeaseDuration, "lease duration")
	fs.DurationVar(&o.RenewDeadline, "renew-deadline", demo.DefaultRenewDeadline, "renew deadline (below the lease duration)")
	fs.DurationVar(&o.RetryPeriod, "retry-period", demo.DefaultRetryPeriod, "retry period (renew deadline above 1.2 × this)")
	fs.DurationVar(&o.Dwell, "dwell", demo.DefaultDwell, "how long each leader leads before it is failed (0: the default; negative: not at all)")
	fs.Int64Var(&seed, "seed", 1, "seed of the fault order and of the changes to the configuration and pods")
	fs.StringVar(&timeline, "timeline", "", "write an SVG timeline of the terms, replays and faults to this file")
	fs.StringVar(&metrics, "metrics-addr", "", "serve each replica's /metrics, /healthz and /readyz under /<replica>/ on this address (e.g. 127.0.0.1:9090); off when empty")
	fs.StringVar(&live, "live", "auto", "redraw a live view in place: auto (when stdout is a terminal), always or never")
	fs.StringVar(&logFile, "log-file", "", "write the replicas' own logs to this file instead of stderr")
	logs.register(fs, "off")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: baton demo [flags]\n\nRuns several replicas of the controller in one process on in-memory leases and\nfails the leader again and again, checking every hand-over. Exits 1 if a check failed.\n\n")
		fs.PrintDefaults()
	}
	if code, done := parse(fs, args); done {
		return code
	}
	o.Seed = uint64(seed)
	switch live {
	case "auto":
		o.Live = isTerminal(stdout)
	case "always":
		o.Live = true
	case "never":
	default:
		fmt.Fprintf(stderr, "baton demo: --live %q: want auto, always or never\n", live)
		return exitUsage
	}
	logOut := stderr
	if logFile != "" {
		f, err := os.Create(logFile)
		if err != nil {
			fmt.Fprintf(stderr, "baton demo: %v\n", err)
			return exitUsage
		}
		defer f.Close()
		logOut = f
	}
	logger, err := logs.logger(logOut)
	if err != nil {
		fmt.Fprintf(stderr, "baton demo: %v\n", err)
		return exitUsage
	}
	// Some components log through the default logger; keep them off the view.
	slog.SetDefault(logger)
	o.Logger, o.Out = logger, stdout

	if metrics != "" {
		mux := &demo.Mux{}
		ln, err := net.Listen("tcp", metrics)
		if err != nil {
			fmt.Fprintf(stderr, "baton demo: --metrics-addr: %v\n", err)
			return exitUsage
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				fmt.Fprintf(stderr, "baton demo: metrics server: %v\n", err)
			}
		}()
		defer func() {
			_ = srv.Close()
			<-done
		}()
		if !o.Live {
			fmt.Fprintf(stdout, "serving the replicas' metrics on http://%s/\n", ln.Addr())
		}
		o.Metrics = mux
	}

	rep, err := demo.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "baton demo: %v\n", err)
		return exitUsage
	}
	if err := rep.WriteSummary(stdout); err != nil {
		fmt.Fprintf(stderr, "baton demo: %v\n", err)
		return exitFailed
	}
	if timeline != "" {
		if err := writeTimeline(timeline, rep); err != nil {
			fmt.Fprintf(stderr, "baton demo: --timeline: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "timeline written to %s\n", timeline)
	}
	if !rep.OK() {
		return exitFailed
	}
	return exitOK
}

func writeTimeline(path string, rep *demo.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteSVG(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
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
