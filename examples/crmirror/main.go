// Command crmirror is a controller-runtime controller on Baton: it mirrors one
// ConfigMap into every namespace labelled baton.dev/mirror=true. Run several replicas;
// Baton's elector picks the one that reconciles, the others keep their caches warm,
// and a replica that loses the lease campaigns again instead of exiting.
//
//	crmirror --kubeconfig ~/.kube/config --source default/shared --lease-namespace default
//
// Several replicas on one machine need a probe port each (--health-addr), or none
// (--health-addr 0).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	batoncr "github.com/baton-dev/baton/pkg/integration/controllerruntime"
	"github.com/baton-dev/baton/pkg/termctx"
)

// MirrorLabel marks the namespaces that get a copy of the source ConfigMap.
const MirrorLabel = "baton.dev/mirror"

// Mirror reconciles one namespace: its copy of the source ConfigMap.
type Mirror struct {
	Reader client.Reader // the manager's cache
	Writer client.Client // fenced: refuses writes once the term has ended
	Source types.NamespacedName
}

// Reconcile makes the namespace's copy equal to the source.
func (m *Mirror) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var ns corev1.Namespace
	if err := m.Reader.Get(ctx, req.NamespacedName, &ns); err != nil || ns.Labels[MirrorLabel] != "true" ||
		ns.Name == m.Source.Namespace {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var src corev1.ConfigMap
	if err := m.Reader.Get(ctx, m.Source, &src); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var dst corev1.ConfigMap
	err := m.Reader.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: src.Name}, &dst)
	switch {
	case apierrors.IsNotFound(err):
		dst = corev1.ConfigMap{Data: src.Data}
		dst.Namespace, dst.Name = ns.Name, src.Name
		return reconcile.Result{}, m.Writer.Create(ctx, &dst)
	case err != nil:
		return reconcile.Result{}, err
	}
	// Why a copy already equal is written again, once per term: the write stamps it
	// with this term and moves its resourceVersion on, so an Update the last leader
	// still had in flight (made at the old resourceVersion) conflicts, and any later
	// write of an older term meets the newer stamp and is refused. Skip it if a
	// rewrite of every copy at each change of leader costs too much for you.
	term, _ := termctx.FromContext(ctx)
	if maps.Equal(dst.Data, src.Data) && dst.Annotations[batoncr.TermAnnotation] == fmt.Sprint(term) {
		return reconcile.Result{}, nil
	}
	dst.Data = src.Data
	return reconcile.Result{}, m.Writer.Update(ctx, &dst) // a conflict requeues
}

// Config is what one replica needs.
type Config struct {
	Rest           *rest.Config
	Source         types.NamespacedName
	LeaseNamespace string
	Runtime        batoncr.Options // LeaderElectionNamespace and ID are filled in
	HealthAddr     string          // "0" disables the probes' server
}

// Setup builds a replica's manager, Runtime and mirror controller.
func Setup(cfg Config) (ctrl.Manager, *batoncr.Runtime, error) {
	mgr, err := ctrl.NewManager(cfg.Rest, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: cfg.HealthAddr,
	})
	if err != nil {
		return nil, nil, err
	}
	opts := cfg.Runtime
	opts.LeaderElectionNamespace, opts.LeaderElectionID = cfg.LeaseNamespace, "crmirror"
	rt, err := batoncr.New(mgr, opts)
	if err != nil {
		return nil, nil, err
	}
	// Every mirrored namespace, when the source changes.
	all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		if obj.GetNamespace() != cfg.Source.Namespace || obj.GetName() != cfg.Source.Name {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: obj.GetNamespace()}}}
		}
		var list corev1.NamespaceList
		if err := mgr.GetCache().List(ctx, &list, client.MatchingLabels{MirrorLabel: "true"}); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, ns := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: ns.Name}})
		}
		return reqs
	})
	// The builder of controller-runtime, from Baton's package: a leader-only controller.
	err = batoncr.NewControllerManagedBy(rt.Manager()).
		For(&corev1.Namespace{}).
		Watches(&corev1.ConfigMap{}, all). // the source, and copies edited by hand
		Named("mirror").
		Complete(&Mirror{Reader: mgr.GetCache(), Writer: rt.FencedClient(nil), Source: cfg.Source})
	return rt.Manager(), rt, err
}

func main() {
	var source, leaseNS string
	flag.StringVar(&source, "source", "default/shared", "the ConfigMap to mirror, namespace/name")
	flag.StringVar(&leaseNS, "lease-namespace", "default", "namespace of the Lease")
	health := flag.String("health-addr", ":8081", "address of /healthz and /readyz")
	release := flag.Bool("release-on-cancel", true, "release the lease on shutdown")
	flag.Parse()
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil)))
	ns, name, ok := strings.Cut(source, "/")
	if !ok || ns == "" || name == "" {
		fmt.Fprintln(os.Stderr, "crmirror: --source must be namespace/name")
		os.Exit(2)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "crmirror:", err)
		os.Exit(1)
	}
	lease := 15 * time.Second
	mgr, _, err := Setup(Config{Rest: cfg, Source: types.NamespacedName{Namespace: ns, Name: name},
		LeaseNamespace: leaseNS, HealthAddr: *health,
		Runtime: batoncr.Options{LeaseDuration: &lease, LeaderElectionReleaseOnCancel: release}})
	if err == nil {
		err = mgr.Start(ctrl.SetupSignalHandler())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crmirror:", err)
		os.Exit(1)
	}
}
