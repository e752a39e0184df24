package app

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/configchange"
	"github.com/baton-dev/baton/pkg/controller/discovery"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	"github.com/baton-dev/baton/pkg/controller/store"
	busevents "github.com/baton-dev/baton/pkg/events"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// Defaults of EmbeddedOptions.
const (
	DefaultLeaseName      = "baton-leader"
	DefaultPublishedName  = "baton-published"
	DefaultConfigName     = "baton-config"
	EmbeddedNamespace     = "embedded"
	embeddedFeedComponent = "pod-feed"
)

// EmbeddedOptions configure NewEmbedded. The zero value takes the defaults
// written on each field.
type EmbeddedOptions struct {
	// LeaseName names the in-memory lease; "" means DefaultLeaseName.
	LeaseName string
	// PublishedName names the in-memory published object; "" means
	// DefaultPublishedName.
	PublishedName string
	// Config is the first configuration document; nil means
	// config.DefaultYAML.
	Config []byte
	// Pods is the first pod set.
	Pods []config.Pod
}

// Embedded is what the replicas of one process share in embedded mode, in
// place of a cluster: the lease, the published object, the configuration
// document and the pods.
type Embedded struct {
	// Leases is the lease every replica campaigns for.
	Leases *k8sle.MemoryStore
	// Published is the object the leaders publish to.
	Published *store.Memory
	// Config is the configuration document each replica reads.
	Config *Document
	// Pods is the pod set each replica discovers.
	Pods *PodSet

	leaseName string
}

// NewEmbedded returns a new embedded world. Its errors name the bad field.
func NewEmbedded(opts EmbeddedOptions) (*Embedded, error) {
	leaseName := cmp.Or(opts.LeaseName, DefaultLeaseName)
	published, err := store.NewMemory(cmp.Or(opts.PublishedName, DefaultPublishedName))
	if err != nil {
		return nil, fmt.Errorf("%w: publishedName: %w", ErrInvalidOptions, err)
	}
	pods, err := NewPodSet(opts.Pods)
	if err != nil {
		return nil, fmt.Errorf("%w: pods: %w", ErrInvalidOptions, err)
	}
	raw := opts.Config
	if raw == nil {
		raw = []byte(config.DefaultYAML)
	}
	return &Embedded{
		Leases:    k8sle.NewMemoryStore(leaseName),
		Published: published,
		Config:    NewDocument(DefaultConfigName, raw),
		Pods:      pods,
		leaseName: leaseName,
	}, nil
}

// Options returns the options of a replica of this world named identity:
// election on Leases (ReleaseOnCancel set, k8sle's default timings, which
// callers usually shorten), configuration from Config, a simulated
// Discovery fed from Pods, publishing to Published. Callers may change any
// field (wrap the stores, set Hooks) before New.
func (e *Embedded) Options(identity string) Options {
	return Options{
		Election: k8sle.Config{
			Identity:        identity,
			LeaseName:       e.leaseName,
			LeaseNamespace:  EmbeddedNamespace,
			ReleaseOnCancel: true,
		},
		LeaseStore:   e.Leases,
		ConfigSource: e.Config.Source(),
		Discovery: func(bus *busevents.EventBus, logger *slog.Logger) (*discovery.Discovery, error) {
			// Empty at first, then the set at its shared version (checked once,
			// there), so that the first publish carries that version.
			d, err := discovery.NewSimulated(bus, nil, discovery.Options{Logger: logger})
			if err == nil {
				pods, version, _ := e.Pods.snapshot()
				err = d.SetPodsAt(pods, version)
			}
			return d, err
		},
		Published: e.Published,
		AllReplica: func(r *Replica) ([]lifecycle.Component, error) {
			return []lifecycle.Component{&podFeed{set: e.Pods, discovery: r.Discovery(), logger: r.logger}}, nil
		},
	}
}

// Document is a configuration document shared by the replicas of one
// process, as a ConfigMap is shared by those of a cluster. The zero value
// is not usable; create one with NewDocument.
type Document struct {
	name string

	// mu guards the fields below.
	mu      sync.Mutex
	raw     []byte
	changed chan struct{} // closed, and replaced, by Set
}

// NewDocument returns a document named name (its source's name is
// "memory:"+name) holding raw.
func NewDocument(name string, raw []byte) *Document {
	return &Document{name: name, raw: bytes.Clone(raw), changed: make(chan struct{})}
}

// Set replaces the document; every source delivers it (or a later one).
func (d *Document) Set(raw []byte) {
	d.mu.Lock()
	d.raw = bytes.Clone(raw)
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
}

// Get returns a copy of the document.
func (d *Document) Get() []byte {
	raw, _ := d.snapshot()
	return raw
}

func (d *Document) snapshot() ([]byte, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return bytes.Clone(d.raw), d.changed
}

// Source returns a configchange.Source that delivers the document at once
// and again after every Set; Sets made while the handler is busy coalesce
// into the newest document.
func (d *Document) Source() configchange.Source { return documentSource{d} }

type documentSource struct{ d *Document }

func (s documentSource) String() string { return "memory:" + s.d.name }

func (s documentSource) Run(ctx context.Context, emit func(configchange.Document)) error {
	for {
		raw, changed := s.d.snapshot()
		emit(configchange.Document{Raw: raw})
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// ErrInvalidPod wraps the errors of pod sets a PodSet refuses.
var ErrInvalidPod = errors.New("app: invalid pod")

// PodSet is a pod set shared by the replicas of one process, as the pods of
// a namespace are shared by those of a cluster. The zero value is not
// usable; create one with NewPodSet.
type PodSet struct {
	// mu guards the fields below.
	mu      sync.Mutex
	pods    []config.Pod // sorted by namespace and name
	version uint64       // 1 for the first set, one up per Set
	changed chan struct{}
}

// NewPodSet returns a set holding pods, checked as by Set.
func NewPodSet(pods []config.Pod) (*PodSet, error) {
	s := &PodSet{changed: make(chan struct{}), version: 1}
	if err := checkPods(pods); err != nil {
		return nil, err
	}
	s.pods = sortedPods(pods)
	return s, nil
}

// Set replaces the set. Each pod needs a namespace and a name, unique
// together, and an IP that parses if it has one; otherwise Set changes
// nothing and returns an error wrapping ErrInvalidPod.
func (s *PodSet) Set(pods []config.Pod) error {
	if err := checkPods(pods); err != nil {
		return err
	}
	sorted := sortedPods(pods)
	s.mu.Lock()
	s.pods = sorted
	s.version++
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	return nil
}

// Get returns a copy of the set, sorted by namespace and name.
func (s *PodSet) Get() []config.Pod {
	pods, _, _ := s.snapshot()
	return pods
}

// Version returns the set's version: 1 for the first set, one up per Set.
// Every replica's Discovery publishes the set with it as its generation, as
// replicas of a cluster publish a pod list's resourceVersion.
func (s *PodSet) Version() uint64 {
	_, v, _ := s.snapshot()
	return v
}

func (s *PodSet) snapshot() ([]config.Pod, uint64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.pods), s.version, s.changed
}

func sortedPods(pods []config.Pod) []config.Pod {
	out := slices.Clone(pods)
	slices.SortFunc(out, func(a, b config.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// checkPods applies the Discovery's rules, so that a set the PodSet takes
// is one the simulated Discovery takes too.
func checkPods(pods []config.Pod) error {
	if err := discovery.CheckPods(pods); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidPod, err)
	}
	return nil
}

// podFeed is the all-replica component that hands a PodSet's changes to
// the replica's simulated Discovery, as an informer hands a cluster's.
type podFeed struct {
	set       *PodSet
	discovery *discovery.Discovery
	logger    *slog.Logger
}

func (f *podFeed) Name() string { return embeddedFeedComponent }

func (f *podFeed) Start(ctx context.Context) error {
	for {
		pods, version, changed := f.set.snapshot()
		if err := f.discovery.SetPodsAt(pods, version); err != nil {
			return fmt.Errorf("app: pod feed: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}
