package controllerruntime

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/baton-dev/baton/pkg/k8s/incarnation"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// Names of the checks New adds to the manager.
const (
	// HealthzCheckName is the /healthz check: it fails while this replica believes it
	// leads but missed its renew deadline (the election is stuck), or a component failed.
	HealthzCheckName = "baton-leader-election"
	// ReadyzCheckName is the /readyz check: it fails until the informers of every
	// leader-only controller's watches are synced on this replica.
	ReadyzCheckName = "baton-warm"
)

// DefaultGracefulShutdownTimeout is the default of Options.GracefulShutdownTimeout.
const DefaultGracefulShutdownTimeout = 30 * time.Second

// Options configure New. The names follow manager.Options where a field means the same;
// the manager's own LeaderElection must stay false (Baton's elector replaces it).
type Options struct {
	// LeaderElectionID is the name of the coordination.k8s.io/v1 Lease of the
	// single-leader election. Required for leader-only work (AddController,
	// AddLeaderOnly, AddReplayer), which they refuse without it. Leave it empty when
	// only sharded controllers are registered (AddShardedController): the Runtime
	// then runs no single-leader election and holds no Lease of its own, and the
	// options below that only that election uses (LeaderElectionNamespace, the
	// timings, LeaderElectionReleaseOnCancel) are not used; DeathSignal and
	// ServerSideFence then apply to the shard Leases.
	LeaderElectionID string
	// LeaderElectionNamespace is the namespace of the Lease. Default, as the
	// manager's: the pod's, from its service account's namespace file; outside a pod
	// it is required with LeaderElectionID.
	LeaderElectionNamespace string
	// Identity names this replica in the Lease's holderIdentity; it must be unique among
	// the replicas. A sharded controller's ring also names its member Lease after it
	// ("<ring>-member-<Identity>"), which must be a DNS-1123 subdomain: lowercase
	// letters, digits, '-' and '.'. Default: the hostname, "-", and a random UUID
	// (defaultIdentity), a valid name; the manager's "<hostname>_<uuid>" is not one.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are the election timings, defaults
	// (nil) 15s, 10s and 2s (the manager's). LeaseDuration whole seconds from 1s to 1h,
	// RetryPeriod at least 100ms, LeaseDuration > RenewDeadline > 1.2 × RetryPeriod. A
	// pointer to zero is refused like a negative duration, not read as the default.
	LeaseDuration *time.Duration
	RenewDeadline *time.Duration
	RetryPeriod   *time.Duration
	// LeaderElectionReleaseOnCancel releases the Lease when the manager stops, so that
	// another replica takes over at once instead of after LeaseDuration. Default (nil):
	// true, unlike the manager's option. Why it is safe here and not in client-go: the
	// manager's elector releases while the leader's controllers may still be writing;
	// Baton ends the term first (its context is cancelled, so the fenced client refuses
	// every write of it), waits for the term's leader-only work to return (up to
	// GracefulShutdownTimeout), and only then releases. Set it to false to keep the
	// Lease until it expires on a graceful stop too.
	LeaderElectionReleaseOnCancel *bool
	// ServerSideFence makes the fenced clients (FencedClient) stamp every write with the
	// Lease token of its term, read from the Lease once per term, and stamp an object
	// before deleting it, for the API server's fence: in a leader-only term the single
	// leader's token (HolderAnnotation, AcquiredAnnotation; the policy of
	// NewAdmissionFence), in a sharded controller's reconcile the shard Lease's token
	// and name (ShardHolderAnnotation, ShardAcquiredAnnotation, ShardLeaseAnnotation;
	// the policies of NewShardedAdmissionFence). The policies judge only writes that
	// carry their token, so install them first, then turn this on.
	ServerSideFence bool
	// GracefulShutdownTimeout bounds how long a term's leader-only work may take to
	// return after the term ended before it is reported as overstaying: the
	// single leader's, and each shard's ShardWork unless its OverstayAfter is set
	// (pkg/termrun's one overstay rule). Default 30s.
	GracefulShutdownTimeout *time.Duration
	// Logger receives the Runtime's logs. Default: the manager's logger, named "baton".
	Logger logr.Logger
	// Clientset reads and writes the Lease. Default: one built from the manager's
	// rest config.
	Clientset kubernetes.Interface
	// MetricsRegisterer receives the Runtime's metrics (baton_*). Default:
	// controller-runtime's metrics.Registry, served on the manager's metrics endpoint.
	// Give each Runtime of one process (tests) a registry of its own.
	MetricsRegisterer prometheus.Registerer
	// DeathSignal lets a follower take the Lease at once when the kubelet reports the
	// leader's container terminated, instead of waiting LeaseDuration out
	// (pkg/k8s/incarnation); the same for the shard Leases of AddShardedController. It needs the environment variables POD_NAMESPACE,
	// POD_NAME, POD_UID (the Downward API) and CONTAINER_NAME (the container's name,
	// literally), and RBAC list and watch on pods in the Lease's namespace. Default
	// (nil): on when all four variables are set, off when none of the three POD_
	// ones is (not in a pod; CONTAINER_NAME alone is set by other environments too),
	// and off with a WARN naming the missing ones otherwise: a manifest from before
	// the death signal (POD_NAME and POD_NAMESPACE only, common for controllers)
	// keeps working, as it did, with crashes waited out. True: on, and an error when
	// any is missing. False: off.
	//
	// A takeover on the kubelet's report gives up the LeaseDuration of slack that
	// waiting a crash out leaves for the requests the dead process had already sent:
	// one still in flight can arrive after the next term began. Update, Patch and
	// Delete of the fenced clients are compare-and-swaps, refused once the next term
	// wrote the object; Create and Apply are not, and are then guarded by the API
	// server's fence alone. With the death signal on, turn ServerSideFence on and
	// install NewAdmissionFence's (or NewShardedAdmissionFence's) policies.
	DeathSignal *bool
	// TerminationMessagePath is the container's terminationMessagePath, where New
	// writes this run's nonce when the death signal is on; the application must not
	// overwrite that file afterwards, and may append at most 4045 bytes (the kubelet
	// keeps the file's last 4096 bytes; see package incarnation). Default (""): the
	// environment variable TERMINATION_MESSAGE_PATH, else /dev/termination-log,
	// Kubernetes' default.
	TerminationMessagePath string
}

// serviceAccountNamespace is the file of the pod's namespace, which the default
// LeaderElectionNamespace is read from (a variable for the tests).
var serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// settings are Options with the defaults applied.
type settings struct {
	election k8sle.Config
	// single is false when LeaderElectionID is empty: no single-leader election.
	single  bool
	stop    time.Duration
	logger  logr.Logger
	metrics prometheus.Registerer
}

// resolve applies the defaults and checks o; errors name the field and wrap
// ErrInvalidOptions.
func (o Options) resolve(managerLogger logr.Logger) (settings, error) {
	s := settings{
		election: k8sle.Config{
			Identity:        o.Identity,
			LeaseName:       o.LeaderElectionID,
			LeaseNamespace:  o.LeaderElectionNamespace,
			LeaseDuration:   deref(o.LeaseDuration, k8sle.DefaultLeaseDuration),
			RenewDeadline:   deref(o.RenewDeadline, k8sle.DefaultRenewDeadline),
			RetryPeriod:     deref(o.RetryPeriod, k8sle.DefaultRetryPeriod),
			ReleaseOnCancel: o.LeaderElectionReleaseOnCancel == nil || *o.LeaderElectionReleaseOnCancel,
		},
		single:  o.LeaderElectionID != "",
		stop:    deref(o.GracefulShutdownTimeout, DefaultGracefulShutdownTimeout),
		logger:  o.Logger,
		metrics: o.MetricsRegisterer,
	}
	if s.single && o.LeaderElectionNamespace == "" {
		ns, err := os.ReadFile(serviceAccountNamespace)
		if err != nil || strings.TrimSpace(string(ns)) == "" {
			return s, fmt.Errorf("%w: LeaderElectionNamespace is empty and this is not a pod (no %s); "+
				"set it to the namespace of the Lease", ErrInvalidOptions, serviceAccountNamespace)
		}
		s.election.LeaseNamespace = strings.TrimSpace(string(ns))
	}
	if err := k8sle.CheckDurations(s.election.LeaseDuration, s.election.RenewDeadline, s.election.RetryPeriod); err != nil {
		return s, fmt.Errorf("%w: %s", ErrInvalidOptions, durationErrors(err))
	}
	if s.stop <= 0 {
		return s, fmt.Errorf("%w: GracefulShutdownTimeout %v is not positive", ErrInvalidOptions, s.stop)
	}
	if s.election.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return s, fmt.Errorf("%w: Identity is empty and the hostname is unknown (%v); set Identity", ErrInvalidOptions, err)
		}
		s.election.Identity = defaultIdentity(host)
	}
	if s.logger.GetSink() == nil {
		s.logger = managerLogger.WithName("baton")
	}
	if s.metrics == nil {
		s.metrics = ctrlmetrics.Registry
	}
	return s, nil
}

// durationErrors says the elector's duration errors with Options' field names.
func durationErrors(err error) string {
	var msgs []string
	for _, e := range k8sle.ConfigErrors(err) {
		var ce *k8sle.ConfigError
		if errors.As(e, &ce) {
			msgs = append(msgs, ce.Field+": "+ce.Reason)
			continue
		}
		msgs = append(msgs, e.Error())
	}
	return strings.Join(msgs, "; ")
}

func deref(d *time.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return *d
}

// deathSignal turns the death signal on in election as o.DeathSignal says: it learns
// this run's incarnation (writing its nonce to the termination message file) and
// gives the elector a Watcher of the holder's pod, which it returns (nil when off).
// Its errors wrap ErrInvalidOptions and name the field.
func (o Options) deathSignal(election *k8sle.Config, cs kubernetes.Interface, logger *slog.Logger) (*incarnation.Watcher, error) {
	if o.DeathSignal != nil && !*o.DeathSignal {
		logger.Info("death signal off (Options.DeathSignal false): a crashed leader's lease is waited out")
		return nil, nil
	}
	inc, err := incarnation.Learn(incarnation.LearnOptions{TerminationLog: o.TerminationMessagePath})
	if errors.Is(err, incarnation.ErrNotInPod) && o.DeathSignal == nil {
		logger.Info("death signal off: " + err.Error())
		return nil, nil
	}
	if err != nil && o.DeathSignal == nil {
		logger.Warn("death signal off: the pod environment is incomplete; a crashed leader's lease is waited out "+
			"(set the variables in the pod spec, or DeathSignal to false to silence this)", "error", err)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: DeathSignal: %w (set them in the pod spec, or set DeathSignal to false)", ErrInvalidOptions, err)
	}
	w, err := incarnation.NewWatcher(cs, logger)
	if err != nil {
		return nil, fmt.Errorf("%w: DeathSignal: %w", ErrInvalidOptions, err)
	}
	election.Incarnation, election.DeathWatch = inc.String(), w
	logger.Info("death signal on: a leader whose container the kubelet reports terminated is taken over at once",
		"incarnation", election.Incarnation)
	return w, nil
}

// defaultIdentity returns the default Identity on host: the hostname in lowercase, its
// characters other than letters, digits and '-' as '-', then "-" and a random
// UUID, so that a member Lease name made of it is a DNS-1123 subdomain (unlike the
// manager's "<hostname>_<uuid>"). A hostname is at most 64 characters, so the
// identity fits in the name with a ring name of up to 140.
func defaultIdentity(host string) string {
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, host)
	clean = strings.Trim(clean, "-")
	if clean == "" {
		return uuid.NewString()
	}
	return clean + "-" + uuid.NewString()
}
