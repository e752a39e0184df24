package crbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cgle "k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	batoncr "github.com/baton-dev/baton/pkg/integration/controllerruntime"
)

// Environment of a re-executed test binary that is one replica of the crash benchmark
// (BenchmarkCrashFailover): a process of its own, so that the benchmark can SIGKILL it.
const (
	childImplEnv       = "CRBENCH_CHILD_IMPL"
	childLeaseEnv      = "CRBENCH_CHILD_LEASE"
	childIdentityEnv   = "CRBENCH_CHILD_IDENTITY"
	childKubeconfigEnv = "CRBENCH_CHILD_KUBECONFIG"
	childTimingsEnv    = "CRBENCH_CHILD_TIMINGS"
	childTermLogEnv    = "CRBENCH_CHILD_TERMINATION_LOG"
)

// The replica's lines on stdout, and the one it reads on stdin.
const (
	lineStarted    = "started"            // its elector or manager is about to start
	lineLeading    = "leading"            // "leading <unix ns>": a term started then
	lineDeath      = "death-takeovers"    // "death-takeovers <n>": baton_death_takeovers_total
	requestStats   = "stats"              // asks for a lineDeath answer
	implClientGo   = "client-go"          // client-go's leaderelection alone
	implBatonDeath = implBaton + "-death" // Baton's integration with the death signal
)

// childMain is one replica: the implementation childImplEnv names on the Lease
// childLeaseEnv, reporting on stdout when its terms start. It exits when stdin closes
// (the benchmark is gone) or when it is killed.
func childMain() int {
	klog.SetLogger(logr.Discard())
	ctrl.SetLogger(logr.Discard())
	if err := runChild(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func runChild() error {
	impl, lease, id := os.Getenv(childImplEnv), os.Getenv(childLeaseEnv), os.Getenv(childIdentityEnv)
	tm, err := parseTimings(os.Getenv(childTimingsEnv))
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv(childKubeconfigEnv))
	if err != nil {
		return err
	}
	out := &childOut{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var registry *prometheus.Registry
	var run func(context.Context) error
	switch impl {
	case implClientGo:
		run, err = clientGoChild(cfg, lease, id, tm, out)
	case implStock:
		run, err = stockChild(cfg, lease, tm, out)
	case implBaton, implBatonDeath:
		registry = prometheus.NewRegistry()
		run, err = batonChild(cfg, lease, id, tm, impl == implBatonDeath, registry, out)
	default:
		err = fmt.Errorf("%s=%q: unknown implementation", childImplEnv, impl)
	}
	if err != nil {
		return err
	}
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == requestStats {
				out.line(fmt.Sprintf("%s %d", lineDeath, deathTakeovers(registry)))
			}
		}
		cancel() // stdin closed: the benchmark is gone
	}()
	out.line(lineStarted)
	if err := run(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// childOut writes whole lines to stdout, one at a time.
type childOut struct{ mu sync.Mutex }

func (o *childOut) line(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Println(s)
}

func (o *childOut) leading() { o.line(fmt.Sprintf("%s %d", lineLeading, time.Now().UnixNano())) }

// deathTakeovers reads baton_death_takeovers_total from registry; -1 without one.
func deathTakeovers(registry *prometheus.Registry) int64 {
	if registry == nil {
		return -1
	}
	mfs, err := registry.Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() == "baton_death_takeovers_total" && len(mf.GetMetric()) == 1 {
			return int64(mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
	return -1
}

// noop is the replicas' controller: it reconciles the bench ConfigMaps and does nothing.
type noop struct{}

func (noop) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	return reconcile.Result{}, nil
}

// clientGoChild is client-go's elector on a LeaseLock, no controller: what a program
// that uses client-go's leaderelection directly gets.
func clientGoChild(cfg *rest.Config, lease, id string, tm timings, out *childOut) (func(context.Context) error, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	le, err := cgle.NewLeaderElector(cgle.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "default", Name: lease},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		LeaseDuration: tm.lease, RenewDeadline: tm.renew, RetryPeriod: tm.retry, Name: lease,
		Callbacks: cgle.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { out.leading() },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { le.Run(ctx); return nil }, nil
}

// stockChild is a manager with controller-runtime's own leader election and the
// controller with EnableWarmup; its term starts when Elected closes.
func stockChild(cfg *rest.Config, lease string, tm timings, out *childOut) (func(context.Context) error, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:           scheme,
		Metrics:          metricsserver.Options{BindAddress: "0"},
		LeaderElection:   true,
		LeaderElectionID: lease, LeaderElectionNamespace: "default",
		LeaseDuration: &tm.lease, RenewDeadline: &tm.renew, RetryPeriod: &tm.retry,
	})
	if err != nil {
		return nil, err
	}
	err = ctrl.NewControllerManagedBy(mgr).Named("bench").For(&corev1.ConfigMap{}).
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true), EnableWarmup: ptr.To(true)}).
		Complete(noop{})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		go func() {
			select {
			case <-mgr.Elected():
				out.leading()
			case <-ctx.Done():
			}
		}()
		return mgr.Start(ctx)
	}, nil
}

// batonChild is a manager without election and the controller added through Baton's
// integration, with the death signal when death (the pod environment is set by the
// benchmark) and without it otherwise; its term starts when its leader-only runnable
// does.
func batonChild(cfg *rest.Config, lease, id string, tm timings, death bool, registry prometheus.Registerer, out *childOut) (func(context.Context) error, error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	rt, err := batoncr.New(mgr, batoncr.Options{
		LeaderElectionID: lease, LeaderElectionNamespace: "default", Identity: id,
		LeaseDuration: &tm.lease, RenewDeadline: &tm.renew, RetryPeriod: &tm.retry,
		LeaderElectionReleaseOnCancel: ptr.To(false), Clientset: cs, MetricsRegisterer: registry,
		Logger: logr.Discard(), DeathSignal: ptr.To(death), TerminationMessagePath: os.Getenv(childTermLogEnv),
	})
	if err != nil {
		return nil, err
	}
	err = errors.Join(
		rt.AddController(batoncr.Controller{Name: "bench", Reconciler: noop{}, Watches: []batoncr.Watch{{Object: &corev1.ConfigMap{}}}}),
		rt.AddLeaderOnly("elected", func(ctx context.Context) error {
			out.leading()
			batoncr.Subscribed(ctx)
			<-ctx.Done()
			return nil
		}))
	if err != nil {
		return nil, err
	}
	return mgr.Start, nil
}

// parseTimings parses "lease,renew,retry", e.g. "15s,10s,2s".
func parseTimings(s string) (timings, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return timings{}, fmt.Errorf("timings %q: want lease,renew,retry", s)
	}
	var ds [3]time.Duration
	for i, p := range parts {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil {
			return timings{}, fmt.Errorf("timings %q: %w", s, err)
		}
		if d <= 0 {
			return timings{}, fmt.Errorf("timings %q: %v is not positive", s, d)
		}
		ds[i] = d
	}
	if ds[0] <= ds[1] || ds[1] <= ds[2] {
		return timings{}, fmt.Errorf("timings %q: want lease > renew > retry", s)
	}
	return timings{ds[0], ds[1], ds[2]}, nil
}

// String is "lease/renew/retry", whole seconds as such ("60s/45s/5s").
func (tm timings) String() string {
	return fmtTiming(tm.lease) + "/" + fmtTiming(tm.renew) + "/" + fmtTiming(tm.retry)
}

func fmtTiming(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}
