// Command sharded is a sharded controller-runtime controller on Baton: every replica
// reconciles a share of the ConfigMaps labelled baton.dev/sharded=true, writing into
// each who reconciled it and in which shard, and giving each a ServiceAccount of its
// name that it owns (an owned object: deleted, it is made again at once). The
// ConfigMaps are split into shards by their UID, each ServiceAccount going with its
// owner; each shard is a Lease of its own, led by one replica at a time, and the
// replicas share the shards evenly. Each replica caches only the objects of the
// shards it leads: each is labelled once with its shard, by the replica leading it,
// and each replica's informers select its shards' labels. A replica that stops hands
// its shards to the others, which cache and reconcile their objects at once, with no
// object written. There is no single leader, and no Lease besides the ring's.
//
//	sharded --kubeconfig ~/.kube/config --identity a --lease-namespace default
//
// Run several, each with its own --identity. Each logs the shards it owns whenever
// they change ("shards owned") and every object it reconciles ("reconciled"). In a
// cluster, its service account needs get, list, watch, create, update and delete on
// leases in --lease-namespace, get, list, watch, update and patch (the shard label)
// on configmaps, get, list, watch, create and patch on serviceaccounts, and, for the
// death signal (on when the pod's POD_ variables are set), get, list and watch on
// pods in --lease-namespace.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	batoncr "github.com/baton-dev/baton/pkg/integration/controllerruntime"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/termctx"
)

// Label marks the ConfigMaps the controller reconciles; no replica caches others.
const Label = "baton.dev/sharded"

// The keys the controller writes into each ConfigMap's data.
const (
	ReconciledBy = "reconciled-by"
	ShardKey     = "shard"
)

// Stamper reconciles one ConfigMap: it records who reconciled it, and in which shard,
// and keeps its ServiceAccount.
type Stamper struct {
	Identity string
	Reader   client.Reader // the sharded controller's Reader: the led shards' caches
	Writer   client.Client // fenced: refuses writes once the shard's term has ended
}

// Reconcile is called only for ConfigMaps of the shards this replica leads, under a
// context that carries the shard and its term and ends when the shard moves.
func (s *Stamper) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	st, _ := sharding.ShardTermOf(termctx.Get(ctx))
	logger := log.FromContext(ctx).WithValues("term", st.Term) // it names the object and the shard
	var cm corev1.ConfigMap
	if err := s.Reader.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	err := s.stamp(ctx, &cm, st)
	if err == nil {
		err = s.account(ctx, &cm)
	}
	if errors.Is(err, batoncr.ErrTermEnded) {
		logger.Info("shard moved on; its new owner reconciles the object")
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err // a conflict: the cache lags; requeued
	}
	logger.Info("reconciled")
	return reconcile.Result{}, nil
}

// stamp writes into cm who reconciled it, in which shard, once per shard term, as in
// examples/crmirror: the write stamps the object with the term, so a write of an
// older term that was still in flight is refused.
func (s *Stamper) stamp(ctx context.Context, cm *corev1.ConfigMap, st sharding.ShardTerm) error {
	if cm.Data[ReconciledBy] == s.Identity && cm.Annotations[batoncr.TermAnnotation] == fmt.Sprint(st.Term) {
		return nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[ReconciledBy], cm.Data[ShardKey] = s.Identity, fmt.Sprint(st.Shard)
	return s.Writer.Update(ctx, cm)
}

// account makes cm's ServiceAccount, of its name and owned by it, unless it exists.
// The controller watches ServiceAccounts (Owns), so one deleted enqueues its owner
// and is made again; the garbage collector deletes it with its owner.
func (s *Stamper) account(ctx context.Context, cm *corev1.ConfigMap) error {
	var sa corev1.ServiceAccount
	if err := s.Reader.Get(ctx, client.ObjectKeyFromObject(cm), &sa); !apierrors.IsNotFound(err) {
		return err
	}
	sa = corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name}}
	if err := controllerutil.SetControllerReference(cm, &sa, s.Writer.Scheme()); err != nil {
		return err
	}
	// Until its owner's replica has labelled it with its shard, a new ServiceAccount
	// is in no shard's cache: it already exists.
	return client.IgnoreAlreadyExists(s.Writer.Create(ctx, &sa))
}

// Config is what one replica needs.
type Config struct {
	Rest           *rest.Config
	Identity       string // unique per replica; empty: the hostname and a random suffix
	LeaseNamespace string // where the ring's Leases live
	// Ring sets the number of shards and the timings; its Name and Namespace are filled in.
	Ring       sharding.Config
	Runtime    batoncr.Options // Identity is filled in; no LeaderElectionID: no single leader
	Logger     logr.Logger     // the manager's; zero: controller-runtime's global logger
	HealthAddr string          // "0" disables the probes' server
}

// Setup builds a replica's manager, Runtime and sharded controller, and a runnable
// that logs the shards the replica owns.
func Setup(cfg Config) (ctrl.Manager, *batoncr.Sharded, error) {
	mgr, err := ctrl.NewManager(cfg.Rest, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: cfg.HealthAddr,
		Logger:                 cfg.Logger,
	})
	if err != nil {
		return nil, nil, err
	}
	opts := cfg.Runtime
	opts.Identity = cfg.Identity
	// No LeaderElectionID: sharded controllers alone need no single leader, and no
	// Lease for one.
	rt, err := batoncr.New(mgr, opts)
	if err != nil {
		return nil, nil, err
	}
	ring := cfg.Ring // its Leases: sharded-shard-<i>, sharded-member-<identity>
	ring.Name, ring.Namespace = "sharded", cfg.LeaseNamespace
	// The builder of controller-runtime, from Baton's package: a sharded controller
	// whose replicas cache only their shards' ConfigMaps of the label and the
	// ServiceAccounts they own, found by a shard label written once per object.
	stamper := &Stamper{Identity: rt.Identity(), Writer: rt.FencedClient(nil)}
	h, err := batoncr.NewControllerManagedBy(rt.Manager()).
		For(&corev1.ConfigMap{}).
		Owns(&corev1.ServiceAccount{}).
		Named("stamper").
		Sharded(ring, batoncr.CacheByLabel, batoncr.ForSelector(labels.SelectorFromSet(labels.Set{Label: "true"}))).
		Build(stamper)
	if err != nil {
		return nil, nil, err
	}
	stamper.Reader = h.Reader() // not the manager's cache, which would cache them all
	logger := mgr.GetLogger().WithName("shards").WithValues("identity", rt.Identity())
	// On the manager itself, which runs it on every replica (rt.Manager() would
	// refuse a RunnableFunc: the manager runs those as leader-only work).
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		logShards(ctx, h, logger)
		return nil
	}))
	return mgr, h, err
}

// logShards logs the shards h leads whenever they change, until ctx ends.
func logShards(ctx context.Context, h *batoncr.Sharded, logger logr.Logger) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var last []int
	for {
		var owned []int
		for _, st := range h.Sharder().Owned() {
			owned = append(owned, st.Shard)
		}
		slices.Sort(owned)
		if !slices.Equal(owned, last) {
			logger.Info("shards owned", "count", len(owned), "shards", owned, "members", len(h.Sharder().Members()))
			last = owned
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func main() {
	identity := flag.String("identity", "", "this replica's name, unique per replica; empty: the hostname and a random suffix")
	leaseNS := flag.String("lease-namespace", "default", "namespace of the ring's Leases")
	shards := flag.Int("shards", 0, "number of shards, the same on every replica; 0: 64")
	health := flag.String("health-addr", "0", `address of /healthz and /readyz, such as ":8081"; "0": off`)
	flag.Parse() // with --kubeconfig, which controller-runtime adds
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil)))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sharded:", err)
		os.Exit(1)
	}
	mgr, _, err := Setup(Config{Rest: cfg, Identity: *identity, LeaseNamespace: *leaseNS, HealthAddr: *health,
		Ring: sharding.Config{Shards: *shards}})
	if err == nil {
		err = mgr.Start(ctrl.SetupSignalHandler())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sharded:", err)
		os.Exit(1)
	}
}
