package app

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/controller/configchange"
	"github.com/baton-dev/baton/pkg/controller/discovery"
	"github.com/baton-dev/baton/pkg/controller/store"
	busevents "github.com/baton-dev/baton/pkg/events"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// ClusterConfig describes a replica of `baton run`: what it reads and
// writes in a Kubernetes cluster.
type ClusterConfig struct {
	// Clientset talks to the API server. Required.
	Clientset kubernetes.Interface
	// Identity is the lease holder identity, usually the pod name.
	// Required.
	Identity string
	// Namespace holds the configuration ConfigMap, the pods and the
	// published ConfigMap. Required.
	Namespace string
	// LeaseNamespace holds the Lease; "" means Namespace.
	LeaseNamespace string
	// LeaseName names the Lease; "" means DefaultLeaseName.
	LeaseName string
	// ConfigMap names the configuration ConfigMap; "" means
	// DefaultConfigName. ConfigKey is its key; "" means
	// configchange.DefaultKey.
	ConfigMap string
	ConfigKey string
	// PodSelector selects the target pods (label selector syntax).
	// Required: an empty selector would select every pod.
	PodSelector string
	// PublishedConfigMap names the ConfigMap the leader publishes to; ""
	// means DefaultPublishedName.
	PublishedConfigMap string
	// LeaseDuration, RenewDeadline and RetryPeriod are the election's
	// timings; zero means k8sle's defaults (15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// ReleaseOnCancel releases the lease when Run's context ends, so a
	// follower takes over at once after a graceful shutdown.
	ReleaseOnCancel bool
}

// Cluster returns the Options of a cluster replica: election on the
// Lease, configuration from the ConfigMap (informer), pods from an
// informer, publishing to the published ConfigMap. The caller may set
// further fields (Logger, Hooks, ...) before New. Its errors name every bad
// field and wrap ErrInvalidOptions or the constructor's error.
func Cluster(c ClusterConfig) (Options, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...)))
	}
	if c.Clientset == nil {
		bad("clientset is nil")
	}
	if c.Identity == "" {
		bad("identity is empty (set POD_NAME or --identity)")
	}
	if c.Namespace == "" {
		bad("namespace is empty")
	}
	if c.PodSelector == "" {
		bad("podSelector is empty; it would select every pod in the namespace")
	}
	if err := errors.Join(errs...); err != nil {
		return Options{}, err
	}
	leaseNS := cmp.Or(c.LeaseNamespace, c.Namespace)
	leaseName := cmp.Or(c.LeaseName, DefaultLeaseName)
	leases, err := k8sle.NewKubernetesStore(c.Clientset, leaseNS, leaseName)
	if err != nil {
		errs = append(errs, err)
	}
	source, err := configchange.ConfigMap(c.Clientset, c.Namespace, cmp.Or(c.ConfigMap, DefaultConfigName), c.ConfigKey)
	if err != nil {
		errs = append(errs, err)
	}
	published, err := store.NewConfigMap(c.Clientset, c.Namespace, cmp.Or(c.PublishedConfigMap, DefaultPublishedName))
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Options{}, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	cs, ns, selector := c.Clientset, c.Namespace, c.PodSelector
	return Options{
		Election: k8sle.Config{
			Identity:        c.Identity,
			LeaseName:       leaseName,
			LeaseNamespace:  leaseNS,
			LeaseDuration:   c.LeaseDuration,
			RenewDeadline:   c.RenewDeadline,
			RetryPeriod:     c.RetryPeriod,
			ReleaseOnCancel: c.ReleaseOnCancel,
		},
		LeaseStore:   leases,
		ConfigSource: source,
		Discovery: func(bus *busevents.EventBus, logger *slog.Logger) (*discovery.Discovery, error) {
			return discovery.NewCluster(bus, cs, ns, selector, discovery.Options{Logger: logger})
		},
		Published:      published,
		ProcessMetrics: true,
	}, nil
}
