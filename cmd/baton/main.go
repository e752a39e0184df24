package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/klog/v2"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // a check of the demo failed, or the controller failed
	exitUsage  = 2 // bad flags or setup
	// exitInterrupted is the shell's code for a process ended by SIGINT
	// (128 + 2): the demo interrupted by Ctrl-C.
	exitInterrupted = 130
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts a graceful stop; a second one kills at once.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: baton <command> [flags]

commands:
  demo   run several replicas in one process on in-memory leases, fail the
         leader again and again, and check every hand-over (no cluster needed)
  run    run one replica of the controller against a Kubernetes cluster
  version
         print the module version and the VCS revision baton was built from

Run "baton <command> -h" for the command's flags.
`

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "demo":
		return demoMain(ctx, args[1:], stdout, stderr)
	case "run":
		return runMain(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		return versionMain(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "baton: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// parse parses a command's flags; done reports that the command should not
// go on, with its exit code (0 for -h).
func parse(fs *flag.FlagSet, args []string) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK, true
	case err != nil:
		if hint := suggest(fs, err); hint != "" {
			fmt.Fprintf(fs.Output(), "baton %s: %v%s\n", fs.Name(), err, hint)
		}
		return exitUsage, true
	case fs.NArg() > 0:
		fmt.Fprintf(fs.Output(), "baton %s: unexpected arguments: %s\n", fs.Name(), strings.Join(fs.Args(), " "))
		return exitUsage, true
	}
	return exitOK, false
}

// usageErrors prints each error of a command's flags on its own line and
// returns exitUsage.
func usageErrors(stderr io.Writer, command string, errs []error) int {
	for _, err := range errs {
		fmt.Fprintf(stderr, "baton %s: %v\n", command, err)
	}
	return exitUsage
}

// unjoin returns the errors err joins (errors.Join), or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// logFlags are the logging flags both commands take.
type logFlags struct {
	level  string
	format string
}

func (l *logFlags) register(fs *flag.FlagSet, defaultLevel string) {
	fs.StringVar(&l.level, "log-level", defaultLevel, "log level of the controller's components: debug, info, warn, error or off")
	fs.StringVar(&l.format, "log-format", "text", "log format: text or json")
}

// logger returns the logger the flags describe, writing to w; "off"
// discards.
func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	switch strings.ToLower(l.level) {
	case "off", "none":
		return slog.New(slog.DiscardHandler), nil
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "warn", "warning":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn, error or off", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(l.format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", l.format)
}

// useLogger makes logger the process's logger: slog's default, and klog's
// (client-go logs through klog), so that every line goes through the one
// handler, in the one format --log-format chose.
func useLogger(logger *slog.Logger) {
	slog.SetDefault(logger)
	klog.SetSlogLogger(logger)
}
