// Command lifecycle is a controller on Baton's own runtime, with no controller-runtime:
// every replica watches the ConfigMaps labelled baton.dev/inventory=true and keeps a
// summary of them in a StateReplayer; only the leader writes the summary to the
// ConfigMap "inventory", and a new leader gets the current summary the moment it is
// elected, without listing anything.
//
//	lifecycle --kubeconfig ~/.kube/config --namespace default --identity a
//
// Each replica needs a name of its own (--identity; in a pod, $HOSTNAME is its name).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/baton-dev/baton/pkg/controller/leaderelection"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/termctx"
)

// Names this controller reads and writes.
const (
	InventoryLabel = "baton.dev/inventory"
	TermAnnotation = "baton.dev/term"
	SummaryName    = "inventory"
)

// ErrTermEnded is returned by a write whose term ended; ErrStaleTerm by a write over
// a newer term's.
var (
	ErrTermEnded = errors.New("lifecycle example: term ended")
	ErrStaleTerm = errors.New("lifecycle example: summary written by a newer term")
)

// Inventory is the state: the names of the labelled ConfigMaps.
type Inventory struct {
	Names []string
	At    time.Time
}

func (*Inventory) EventType() string      { return "example.inventory" }
func (i *Inventory) Timestamp() time.Time { return i.At }

// Watcher runs on every replica: it publishes and caches each new inventory.
type Watcher struct {
	Clients   kubernetes.Interface
	Namespace string
	Replayer  *leadership.StateReplayer[*Inventory]
	synced    atomic.Bool
}

func (w *Watcher) Name() string { return "watcher" }

// Synced reports that the first inventory is cached: the replica may campaign now.
func (w *Watcher) Synced() bool { return w.synced.Load() }

func (w *Watcher) Start(ctx context.Context) error {
	f := informers.NewSharedInformerFactoryWithOptions(w.Clients, 0, informers.WithNamespace(w.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = InventoryLabel + "=true" }))
	inf := f.Core().V1().ConfigMaps().Informer()
	publish := func(any) {
		inv := &Inventory{Names: []string{}, At: time.Now()}
		for _, obj := range inf.GetStore().List() {
			inv.Names = append(inv.Names, obj.(*corev1.ConfigMap).Name)
		}
		slices.Sort(inv.Names)
		w.Replayer.Publish(inv) // cache and publish, one step
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: publish, UpdateFunc: func(_, o any) { publish(o) }, DeleteFunc: publish}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		publish(nil) // an empty inventory is state too
		w.synced.Store(true)
	}
	<-ctx.Done()
	f.Shutdown()
	return nil
}

// Writer runs on the leader only, once per term: it writes each inventory it receives.
type Writer struct {
	Clients   kubernetes.Interface
	Namespace string
	Bus       *busevents.EventBus
}

func (w *Writer) Name() string            { return "writer" }
func (w *Writer) RequiredState() []string { return []string{(*Inventory)(nil).EventType()} }

func (w *Writer) Start(ctx context.Context) error {
	// Leader-only because the runtime runs Writer as leader-only; the channel
	// closes when the term ends.
	ch := busevents.Subscribe[*Inventory](ctx, w.Bus, "writer", 1)
	lifecycle.Subscribed(ctx) // the replay of the current inventory may go out now
	for {
		select {
		case <-ctx.Done():
			return nil
		case inv, ok := <-ch:
			if !ok {
				return nil // the term ended
			}
			if err := w.Write(ctx, inv); err != nil {
				slog.Warn("writing the inventory", "error", err)
			}
			lifecycle.HoldsState(ctx, inv.EventType())
		}
	}
}

// Write stores inv in the summary ConfigMap, fenced by the term of ctx: refused once
// the term ended (by the elector's clock), refused over a newer term's stamp, and
// written under the resourceVersion it read, so a newer write in between conflicts.
func (w *Writer) Write(ctx context.Context, inv *Inventory) error {
	term, _ := termctx.FromContext(ctx)
	api := w.Clients.CoreV1().ConfigMaps(w.Namespace)
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: term %d", ErrTermEnded, term)
		}
		cm, err := api.Get(ctx, SummaryName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm, err = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: SummaryName}}, nil
		}
		if err != nil {
			return err
		}
		if old, _ := strconv.ParseUint(cm.Annotations[TermAnnotation], 10, 64); old > term {
			return fmt.Errorf("%w: %d > %d", ErrStaleTerm, old, term)
		}
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[TermAnnotation] = strconv.FormatUint(term, 10) // keep the others
		cm.Data = map[string]string{"count": strconv.Itoa(len(inv.Names)), "names": fmt.Sprint(inv.Names)}
		if cm.ResourceVersion == "" {
			_, err = api.Create(ctx, cm, metav1.CreateOptions{})
		} else {
			_, err = api.Update(ctx, cm, metav1.UpdateOptions{})
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
}

// Replica is one replica's parts.
type Replica struct {
	Runtime *lifecycle.Manager
	Elector *leaderelection.Component
	Bus     *busevents.EventBus // Stop it after Runtime.Run returned
	Writer  *Writer
}

// Setup builds one replica: the bus, the elector, the runtime and both components.
// leaseClients reads and writes the Lease; clients everything else.
func Setup(clients, leaseClients kubernetes.Interface, namespace string, election k8sle.Config) (*Replica, error) {
	r := &Replica{Bus: busevents.NewEventBus(1024), Writer: &Writer{Clients: clients, Namespace: namespace}}
	var err error
	if r.Elector, err = leaderelection.New(election, leaseClients, r.Bus, leaderelection.Callbacks{}, nil); err != nil {
		return nil, err
	}
	// The term's context ends by the elector's clock; a failed writer is restarted in
	// its term, and a term missing its writer (stuck from the last term, or failing
	// for StepDownGrace in a row) is resigned, so that another replica leads.
	r.Runtime, err = lifecycle.NewManager(r.Bus, lifecycle.Options{TermContext: r.Elector.TermContext, StepDown: r.Elector.Resign})
	if err != nil {
		return nil, err
	}
	r.Writer.Bus = r.Bus
	replayer := leadership.NewStateReplayer[*Inventory](r.Bus)
	err = errors.Join(r.Runtime.AddCampaigner(r.Elector), // campaigns once the watcher synced
		r.Runtime.AddAllReplica(&Watcher{Clients: clients, Namespace: namespace, Replayer: replayer}),
		r.Runtime.AddLeaderOnly(r.Writer),
		r.Runtime.AddReplayer("inventory", replayer))
	return r, err
}

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file; empty: in-cluster")
	namespace := flag.String("namespace", "default", "namespace of the ConfigMaps and the Lease")
	identity := flag.String("identity", os.Getenv("HOSTNAME"), "this replica's name in the Lease")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lifecycle:", err)
		os.Exit(1)
	}
	clients := kubernetes.NewForConfigOrDie(cfg)
	r, err := Setup(clients, clients, *namespace, k8sle.Config{Identity: *identity,
		LeaseName: "inventory", LeaseNamespace: *namespace, ReleaseOnCancel: true})
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		r.Bus.Start()
		err = r.Runtime.Run(ctx)
		stop()
		r.Bus.Stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lifecycle:", err)
		os.Exit(1)
	}
}
