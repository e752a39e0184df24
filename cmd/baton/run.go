package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/baton-dev/baton/pkg/controller/app"
	"github.com/baton-dev/baton/pkg/controller/metrics"
	"github.com/baton-dev/baton/pkg/k8s/incarnation"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// runFlags are the flags of `baton run`.
type runFlags struct {
	c          app.ClusterConfig
	kubeconfig string
	metrics    string // /metrics, /healthz and /readyz, with details
	probes     string // /healthz and /readyz for the kubelet, status only
	logs       logFlags
	// deathSignal turns the death signal on in a pod (pkg/k8s/incarnation);
	// terminationLog is the container's terminationMessagePath.
	deathSignal    explicitBool
	terminationLog string
	// debugOOMAfter is --debug-oom-after (debugOOM): 0 is off.
	debugOOMAfter time.Duration
	// getenv reads the pod identity; nil is os.Getenv (tests set it).
	getenv func(string) string
	// fs is the flag set the flags are registered on, which tells the
	// names the user typed.
	fs *flag.FlagSet
	// leaderElect is --leader-elect, kubebuilder's flag: baton run always
	// elects, and refuses false.
	leaderElect bool
}

func (r *runFlags) register(fs *flag.FlagSet) {
	c := &r.c
	fs.StringVar(&r.kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	fs.StringVar(&c.Identity, "identity", os.Getenv("POD_NAME"), "lease holder identity, unique per replica (default $POD_NAME)")
	fs.StringVar(&c.Namespace, "namespace", cmp.Or(os.Getenv("POD_NAMESPACE"), "default"), "namespace of the configuration ConfigMap, the pods and the published ConfigMap ($POD_NAMESPACE when set)")
	fs.StringVar(&c.LeaseNamespace, "leader-elect-resource-namespace", "", "namespace of the Lease (default: --namespace)")
	fs.StringVar(&c.LeaseName, "leader-elect-resource-name", app.DefaultLeaseName, "name of the Lease")
	fs.BoolVar(&r.leaderElect, "leader-elect", true, "run the leader election (baton run always does; false is refused)")
	fs.StringVar(&c.ConfigMap, "config-configmap", app.DefaultConfigName, "ConfigMap holding the controller's configuration")
	fs.StringVar(&c.ConfigKey, "config-key", "config.yaml", "key of the configuration in that ConfigMap")
	fs.StringVar(&c.PodSelector, "pod-selector", "app=haproxy", "label selector of the target pods")
	fs.StringVar(&c.PublishedConfigMap, "published-configmap", app.DefaultPublishedName, "ConfigMap the leader publishes to")
	fs.StringVar(&r.metrics, "metrics-bind-address", "127.0.0.1:8080", "address serving /metrics, /healthz and /readyz, without authentication (localhost by default; widen it only behind a NetworkPolicy); off when empty")
	fs.StringVar(&r.probes, "health-probe-bind-address", "", "address serving /healthz and /readyz for the kubelet, status code and a word only (e.g. :8081 in a pod); off when empty")
	fs.DurationVar(&c.LeaseDuration, "leader-elect-lease-duration", k8sle.DefaultLeaseDuration, "lease duration")
	fs.DurationVar(&c.RenewDeadline, "leader-elect-renew-deadline", k8sle.DefaultRenewDeadline, "renew deadline (below the lease duration)")
	fs.DurationVar(&c.RetryPeriod, "leader-elect-retry-period", k8sle.DefaultRetryPeriod, "retry period (renew deadline above 1.2 × this)")
	r.deathSignal.v = true
	fs.Var(&r.deathSignal, "death-signal", "in a pod, take the lease at once when the kubelet reports the leader's container terminated, instead of waiting the lease out (needs POD_NAMESPACE, POD_NAME, POD_UID and CONTAINER_NAME; off outside a pod, and off with a warning when some are missing unless the flag is given)")
	fs.StringVar(&r.terminationLog, "termination-message-path", incarnation.DefaultTerminationLog, "the container's terminationMessagePath, where the death signal writes this run's nonce (nothing else may overwrite it)")
	fs.DurationVar(&r.debugOOMAfter, "debug-oom-after", 0, "for tests only: this long after the start, allocate memory until the container's memory limit kills the process (0: off)")
	r.logs.register(fs, "info")
	addAliases(fs)
	r.fs = fs
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: baton run [flags]\n\nRuns one replica of the controller against a Kubernetes cluster. SIGTERM or SIGINT\nstops it gracefully: leader work stops, then the lease is released.\n\n")
		fs.PrintDefaults()
	}
}

// check reports every flag the run cannot use, each naming its flag,
// before anything is built.
func (r *runFlags) check() []error {
	c := &r.c
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	named := flagNamer(r.fs)
	if !r.leaderElect {
		bad("%s=false: baton run runs its leader-only work only in a term of the Lease; drop the flag", named("leader-elect"))
	}
	if c.Identity == "" {
		bad("--identity is empty and $POD_NAME is not set: each replica needs a unique identity")
	}
	namespaces := []struct{ flag, v string }{{"--namespace", c.Namespace}}
	if c.LeaseNamespace != "" { // "" means --namespace
		namespaces = append(namespaces, struct{ flag, v string }{named("leader-elect-resource-namespace"), c.LeaseNamespace})
	}
	for _, ns := range namespaces {
		if msgs := validation.IsDNS1123Label(ns.v); len(msgs) > 0 {
			bad("%s %q: %s", ns.flag, ns.v, strings.Join(msgs, "; "))
		}
	}
	for _, n := range []struct{ flag, v string }{{named("leader-elect-resource-name"), c.LeaseName}, {"--config-configmap", c.ConfigMap}, {"--published-configmap", c.PublishedConfigMap}} {
		if msgs := validation.IsDNS1123Subdomain(n.v); len(msgs) > 0 {
			bad("%s %q: %s", n.flag, n.v, strings.Join(msgs, "; "))
		}
	}
	if msgs := validation.IsConfigMapKey(c.ConfigKey); len(msgs) > 0 {
		bad("--config-key %q: %s", c.ConfigKey, strings.Join(msgs, "; "))
	}
	if strings.TrimSpace(c.PodSelector) == "" {
		bad("--pod-selector is empty: it would select every pod in the namespace")
	} else if _, err := labels.Parse(c.PodSelector); err != nil {
		bad("--pod-selector %q: %v", c.PodSelector, err)
	}
	errs = append(errs, checkTimings(c.LeaseDuration, c.RenewDeadline, c.RetryPeriod, timingBlame(r.fs, runTimingFlags))...)
	if r.debugOOMAfter < 0 {
		bad("--debug-oom-after %v: want 0 (off) or a positive duration", r.debugOOMAfter)
	}
	metricsFlag, probesFlag := named("metrics-bind-address"), named("health-probe-bind-address")
	for _, a := range []struct{ flag, v string }{{metricsFlag, r.metrics}, {probesFlag, r.probes}} {
		if a.v == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.v); err != nil {
			bad("%s %q: %v", a.flag, a.v, err)
		}
	}
	if r.metrics != "" && r.metrics == r.probes {
		bad("%s %q is also %s: give the probes their own address, or leave %s empty (the metrics address serves the probes too)", probesFlag, r.probes, metricsFlag, probesFlag)
	}
	if _, err := r.logs.logger(io.Discard); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// runTimingFlags and demoTimingFlags name the flag of each election
// duration, by its k8sle.ConfigError.Field (the demo's options use the same
// field names).
var (
	runTimingFlags = map[string]string{
		"LeaseDuration": "leader-elect-lease-duration",
		"RenewDeadline": "leader-elect-renew-deadline",
		"RetryPeriod":   "leader-elect-retry-period",
	}
	demoTimingFlags = map[string]string{
		"LeaseDuration": "lease-duration",
		"RenewDeadline": "renew-deadline",
		"RetryPeriod":   "retry-period",
	}
)

// checkTimings checks the election's timing flags with the election's own
// check; each error names the flag flagOf gives for its field.
func checkTimings(lease, renew, retry time.Duration, flagOf func(field string) string) []error {
	err := k8sle.CheckDurations(lease, renew, retry)
	if err == nil {
		return nil
	}
	var errs []error
	for _, e := range unjoin(err) {
		var ce *k8sle.ConfigError
		if errors.As(e, &ce) {
			e = fmt.Errorf("%s: %s", flagOf(ce.Field), ce.Reason)
		}
		errs = append(errs, e)
	}
	return errs
}

func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var rf runFlags
	rf.register(fs)
	if code, done := parse(fs, args); done {
		return code
	}
	if errs := rf.check(); len(errs) > 0 {
		return usageErrors(stderr, "run", errs)
	}
	logger, _ := rf.logs.logger(stderr)
	useLogger(logger)
	r, deaths, err := rf.replica(logger)
	if err != nil {
		return usageErrors(stderr, "run", unjoin(err))
	}
	if deaths != nil {
		// The pod watches end with the elector; wait for them before exiting.
		defer deaths.Wait()
	}
	if rf.metrics != "" {
		stop, err := serveRun(flagNamer(rf.fs)("metrics-bind-address"), "serving metrics", rf.metrics, r.Handler(), logger)
		if err != nil {
			r.Close()
			return usageErrors(stderr, "run", []error{err})
		}
		defer stop()
	}
	if rf.probes != "" {
		stop, err := serveRun(flagNamer(rf.fs)("health-probe-bind-address"), "serving probes", rf.probes, probeHandler(r.Healthy, r.Ready), logger)
		if err != nil {
			r.Close()
			return usageErrors(stderr, "run", []error{err})
		}
		defer stop()
	}
	if rf.debugOOMAfter > 0 {
		oomCtx, stopOOM := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); debugOOM(oomCtx, rf.debugOOMAfter, logger) }()
		defer func() { stopOOM(); <-done }()
	}
	c := rf.c
	logger.Info("baton run starting", "identity", c.Identity, "namespace", c.Namespace,
		"lease", cmp.Or(c.LeaseNamespace, c.Namespace)+"/"+c.LeaseName, "config", c.ConfigMap,
		"pods", c.PodSelector, "published", c.PublishedConfigMap)
	if err := r.Run(ctx); err != nil {
		logger.Error("controller stopped with an error", "error", err)
		return exitFailed
	}
	logger.Info("baton run stopped")
	return exitOK
}

// replica builds the replica the flags describe, and the watcher of the
// death signal when it is on (nil when off): call its Wait after the
// replica's Run returned.
func (r *runFlags) replica(logger *slog.Logger) (*app.Replica, *incarnation.Watcher, error) {
	cfg, err := restConfig(r.kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	r.c.Clientset, err = kubernetes.NewForConfig(rest.AddUserAgent(cfg, "baton/"+r.c.Identity))
	if err != nil {
		return nil, nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	r.c.ReleaseOnCancel = true
	opts, err := app.Cluster(r.c)
	if err != nil {
		return nil, nil, err
	}
	opts.Logger = logger
	deaths, err := r.useDeathSignal(&opts.Election, logger)
	if err != nil {
		return nil, nil, err
	}
	rep, err := app.New(opts)
	if err != nil {
		return nil, nil, err
	}
	return rep, deaths, nil
}

// useDeathSignal sets the death signal in election when --death-signal is
// on and the process runs in a pod: it learns this run's incarnation
// (writing its nonce to --termination-message-path) and gives the elector
// a Watcher of the holder's pod, which it returns. Outside a pod (none of
// POD_NAMESPACE, POD_NAME, POD_UID set) it leaves election as it is and logs
// so once; some of the four variables set but not all turns it off with a
// WARN naming the missing ones, or is such an error when --death-signal was
// given.
func (r *runFlags) useDeathSignal(election *k8sle.Config, logger *slog.Logger) (*incarnation.Watcher, error) {
	if !r.deathSignal.v {
		logger.Info("death signal off (--death-signal=false): a crashed leader's lease is waited out")
		return nil, nil
	}
	getenv := r.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	inc, err := incarnation.Learn(incarnation.LearnOptions{Getenv: getenv, TerminationLog: r.terminationLog})
	if errors.Is(err, incarnation.ErrNotInPod) {
		logger.Info("death signal off: " + err.Error())
		return nil, nil
	}
	if err != nil && !r.deathSignal.set {
		// Why not an error: a manifest from before the death signal sets POD_NAME
		// (and often POD_NAMESPACE) only, and must keep working after an upgrade.
		logger.Warn("death signal off: the pod environment is incomplete; a crashed leader's lease is waited out "+
			"(set the variables in the pod spec, see deploy/deployment.yaml, or pass --death-signal=false to silence this)", "error", err)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--death-signal: %w (set them in the pod spec, see deploy/deployment.yaml, or pass --death-signal=false)", err)
	}
	w, err := incarnation.NewWatcher(r.c.Clientset, logger)
	if err != nil {
		return nil, fmt.Errorf("--death-signal: %w", err)
	}
	election.Incarnation, election.DeathWatch = inc.String(), w
	logger.Info("death signal on: a leader whose container the kubelet reports terminated is taken over at once",
		"incarnation", election.Incarnation)
	return w, nil
}

// serveRun serves h on addr, the value of flag, and logs msg with the
// address bound; stop shuts the server down and waits for it.
func serveRun(flag, msg, addr string, h http.Handler, logger *slog.Logger) (stop func(), err error) {
	bound, stop, err := serveMetrics(addr, h, func(err error) { logger.Error("http server failed", "flag", flag, "error", err) })
	if err != nil {
		// serveMetrics names --metrics-addr, the demo's one flag; name ours.
		return nil, fmt.Errorf("%s: %w", flag, errors.Unwrap(err))
	}
	logger.Info(msg, "addr", bound.String())
	return stop, nil
}

// probeHandler serves /healthz and /readyz for the kubelet, which needs
// only the status code: 200 "ok", or 503 and one word. The reasons (which
// may quote the configuration) stay on --metrics-addr, localhost by
// default, because the probe address listens where the kubelet reaches
// the pod, on its network address.
func probeHandler(healthy, ready func() error) http.Handler {
	terse := func(check func() error, word string) func() error {
		return func() error {
			if check() != nil {
				return errors.New(word)
			}
			return nil
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", metrics.CheckHandler(terse(healthy, "unhealthy")))
	mux.Handle("GET /readyz", metrics.CheckHandler(terse(ready, "unready")))
	return mux
}

// restConfig reads the kubeconfig file, or the in-cluster configuration
// when path is empty.
func restConfig(path string) (*rest.Config, error) {
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("not in a cluster and no --kubeconfig: %w", err)
	}
	return cfg, nil
}

// explicitBool is a boolean flag that remembers whether it was given.
type explicitBool struct{ v, set bool }

func (b *explicitBool) String() string {
	if b == nil {
		return "false"
	}
	return strconv.FormatBool(b.v)
}

func (b *explicitBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.v, b.set = v, true
	return nil
}

func (b *explicitBool) IsBoolFlag() bool { return true }
