package configpublisher_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/configchange"
	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/discovery"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	"github.com/baton-dev/baton/pkg/controller/store"
	busevents "github.com/baton-dev/baton/pkg/events"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

const docBad = "frontends: [{name: http, bind: ':80', defaultBackend: nope}]\nbackends: [{name: web, port: 8080}]\n"

const docB = "frontends: [{name: http, bind: ':81', defaultBackend: web}]\nbackends: [{name: web, port: 8080}]\n"

// replica is one controller process: the all-replica components, the
// publisher and the runtime on one bus.
type replica struct {
	bus   *busevents.EventBus
	m     *lifecycle.Manager
	cfg   *configchange.ConfigChangeHandler
	pods  *discovery.Discovery
	pub   *configpublisher.Component
	store store.Store
}

func newReplica(t *testing.T, s store.Store, retry time.Duration) *replica {
	t.Helper()
	return newReplicaWith(t, configpublisher.Options{Store: s, RetryInterval: retry})
}

func newReplicaWith(t *testing.T, opts configpublisher.Options) *replica {
	t.Helper()
	s := opts.Store
	bus := busevents.NewEventBusWithLogger(64, discard)
	m, err := lifecycle.NewManager(bus, lifecycle.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configchange.New(bus, configchange.Options{Source: configchange.Default(), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := discovery.NewSimulated(bus, []config.Pod{{Namespace: "lb", Name: "haproxy-0", IP: "10.0.0.1", Ready: true}}, discovery.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	opts.Identity, opts.Logger = "replica-a", discard
	pub, err := configpublisher.New(bus, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		m.AddAllReplica(cfg), m.AddAllReplica(pods), m.AddLeaderOnly(pub),
		m.AddReplayer("config", cfg.Replayer()), m.AddReplayer("pods", pods.Replayer()),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	bus.Start()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
		bus.Stop()
	})
	synctest.Wait()
	return &replica{bus: bus, m: m, cfg: cfg, pods: pods, pub: pub, store: s}
}

func (r *replica) lead(term uint64) {
	r.bus.Publish(events.NewBecameLeaderEvent("replica-a", term))
	synctest.Wait()
}

func (r *replica) lose(term uint64) {
	r.bus.Publish(events.NewLostLeadershipEvent("replica-a", term, "test"))
	synctest.Wait()
}

func published(t *testing.T, s store.Store) configpublisher.Published {
	t.Helper()
	o, err := s.Get(context.Background())
	if err != nil {
		t.Fatalf("published object: %v", err)
	}
	p, err := configpublisher.Decode(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPublisherAcrossTerms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t)
		r := newReplica(t, mem, 0)
		if _, err := mem.Get(t.Context()); !errors.Is(err, store.ErrNotFound) {
			t.Fatal("published before leading")
		}

		r.lead(7)
		cur, _ := r.cfg.Current()
		pods, _ := r.pods.Current()
		p := published(t, mem)
		if p.Term != 7 || p.ConfigVersion != cur.Version || p.PodGeneration != pods.Generation ||
			p.Status != configpublisher.StatusValid || p.PublishedBy != "replica-a" {
			t.Fatalf("first publish of term 7: %+v", p)
		}
		var got config.Config
		if err := yaml.Unmarshal([]byte(p.Data[configpublisher.KeyConfig]), &got); err != nil || config.Version(&got) != cur.Version {
			t.Errorf("published config does not round-trip to version %s: %v", cur.Version, err)
		}
		if !strings.Contains(p.Data[configpublisher.KeyPods], "10.0.0.1") {
			t.Errorf("pods data %q", p.Data[configpublisher.KeyPods])
		}
		st := r.m.Status()
		if !st.TermReady || st.Term != 7 {
			t.Errorf("term 7 not ready: %+v", st)
		}

		// An invalid configuration: status invalid, content kept.
		r.cfg.Update(t.Context(), []byte(docBad))
		synctest.Wait()
		p = published(t, mem)
		if p.Status != configpublisher.StatusInvalid || p.ConfigVersion != cur.Version ||
			len(p.Reasons) != 1 || p.Reasons[0] != `frontends[0].defaultBackend: unknown backend "nope"` {
			t.Errorf("after invalid: %+v", p)
		}
		if s := r.pub.State(); !s.Invalid || s.ConfigVersion != cur.Version {
			t.Errorf("state after invalid: %+v", s)
		}

		r.lose(7)
		if s := r.pub.State(); s.Running {
			t.Error("publisher still running after the term")
		}
		// Changes while not leading are not published...
		writes := mem.Writes()
		r.pods.SetPod(config.Pod{Namespace: "lb", Name: "haproxy-1", IP: "10.0.0.2", Ready: true})
		synctest.Wait()
		if mem.Writes() != writes {
			t.Error("published while not leading")
		}

		// ...but the next term publishes the newest state at once, and the
		// replayed invalid configuration is still shown as current.
		r.lead(9)
		pods, _ = r.pods.Current()
		p = published(t, mem)
		if p.Term != 9 || p.PodGeneration != pods.Generation || p.ConfigVersion != cur.Version || p.Status != configpublisher.StatusInvalid {
			t.Errorf("first publish of term 9: %+v (pods generation %d)", p, pods.Generation)
		}
		s := r.pub.State()
		if s.Term != 9 || !s.HasConfig || !s.HasPods || s.PodGeneration != pods.Generation || s.Last.Term != 9 {
			t.Errorf("state in term 9: %+v", s)
		}

		// A valid configuration clears the status.
		vB, err := r.cfg.Update(t.Context(), []byte(docB))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if p = published(t, mem); p.Status != configpublisher.StatusValid || p.ConfigVersion != vB || p.Reasons != nil {
			t.Errorf("after valid: %+v", p)
		}
	})
}

// TestOldInvalidIsHistory: the last refusal was followed by a valid
// configuration; a new leader publishes the valid status.
func TestOldInvalidIsHistory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t)
		r := newReplica(t, mem, 0)
		r.cfg.Update(t.Context(), []byte(docBad))
		vB, _ := r.cfg.Update(t.Context(), []byte(docB))
		synctest.Wait()
		r.lead(3)
		if p := published(t, mem); p.Status != configpublisher.StatusValid || p.ConfigVersion != vB {
			t.Errorf("published %+v", p)
		}
	})
}

// TestReplayRacingNewerOutcome: events of the other type that are older than
// what the publisher holds (a replay racing a live outcome) do not change
// the status.
func TestReplayRacingNewerOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t)
		r := newReplica(t, mem, 0)
		r.lead(1)
		cur, _ := r.cfg.Current()

		oldInvalid := events.NewConfigInvalidEvent("raw-old", "test", []error{errors.New("old refusal")})
		time.Sleep(time.Millisecond)
		newValid := events.NewConfigValidatedEvent(cur.Config, cur.Version, "test")
		r.bus.Publish(newValid)
		r.bus.Publish(oldInvalid)
		synctest.Wait()
		if p := published(t, mem); p.Status != configpublisher.StatusValid {
			t.Errorf("an older refusal took over: %+v", p)
		}

		time.Sleep(time.Millisecond)
		newInvalid := events.NewConfigInvalidEvent("raw-new", "test", []error{errors.New("new refusal")})
		r.bus.Publish(newInvalid)
		r.bus.Publish(newValid) // older than the refusal now held
		synctest.Wait()
		if p := published(t, mem); p.Status != configpublisher.StatusInvalid || p.Reasons[0] != "new refusal" {
			t.Errorf("an older valid configuration cleared a newer refusal: %+v", p)
		}
	})
}

func TestRenderedContent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t)
		r := newReplicaWith(t, configpublisher.Options{Store: mem, Content: configpublisher.RenderedContent{}})
		r.lead(4)
		if _, err := mem.Get(t.Context()); !errors.Is(err, store.ErrNotFound) {
			t.Fatal("published before the term rendered")
		}
		if !r.m.Status().TermReady {
			t.Error("the term waits for a render; it should wait only for configuration and pods")
		}
		cur, _ := r.cfg.Current()

		r.bus.Publish(events.NewTemplateRenderedEvent("global\n  maxconn 2000\n", cur.Version, 1, 4))
		synctest.Wait()
		p := published(t, mem)
		if p.Term != 4 || p.Data[configpublisher.KeyRendered] != "global\n  maxconn 2000\n" || len(p.Data) != 1 ||
			p.ConfigVersion != cur.Version || p.PodGeneration != 1 || p.Status != configpublisher.StatusValid {
			t.Fatalf("after a render: %+v", p)
		}

		// A render of another term is not this term's output.
		r.bus.Publish(events.NewTemplateRenderedEvent("stale", cur.Version, 1, 3))
		synctest.Wait()
		if p := published(t, mem); p.Data[configpublisher.KeyRendered] == "stale" {
			t.Error("published a render of another term")
		}

		r.bus.Publish(events.NewValidationFailedEvent([]error{errors.New("line 7: unknown backend \"x\"")}, "v9", 2, 4))
		synctest.Wait()
		p = published(t, mem)
		if p.Status != configpublisher.StatusInvalid || len(p.Reasons) != 1 || p.Reasons[0] != `line 7: unknown backend "x"` ||
			p.Data[configpublisher.KeyRendered] != "global\n  maxconn 2000\n" || p.InvalidVersion != "render-v9-2" {
			t.Errorf("after a failed validation: %+v", p)
		}

		r.bus.Publish(events.NewTemplateRenderedEvent("global\n  maxconn 10\n", "v10", 3, 4))
		synctest.Wait()
		if p := published(t, mem); p.Status != configpublisher.StatusValid || p.ConfigVersion != "v10" || p.Reasons != nil {
			t.Errorf("after a new valid render: %+v", p)
		}

		// A refused configuration marks the rendered output invalid too.
		r.cfg.Update(t.Context(), []byte(docBad))
		synctest.Wait()
		if p := published(t, mem); p.Status != configpublisher.StatusInvalid || p.ConfigVersion != "v10" {
			t.Errorf("after an invalid configuration: %+v", p)
		}
	})
}

func TestRawContentIgnoresRenders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t)
		r := newReplica(t, mem, 0)
		r.lead(2)
		writes := mem.Writes()
		r.bus.Publish(events.NewValidationFailedEvent([]error{errors.New("line 1: bad")}, "v", 1, 2))
		r.bus.Publish(events.NewTemplateRenderedEvent("x", "v", 1, 2))
		synctest.Wait()
		if mem.Writes() != writes {
			t.Error("raw content reacted to renders")
		}
	})
}

func TestFencedPublisherStopsWriting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t)
		r := newReplica(t, mem, 0)
		r.lead(4)
		// A newer leader elsewhere writes the object.
		o, _ := mem.Get(t.Context())
		o = o.Clone() // read-only: change a copy
		o.Annotations[configpublisher.AnnotationTerm] = "5"
		mem.Set(o)
		writes := mem.Writes()

		r.pods.SetPod(config.Pod{Namespace: "lb", Name: "haproxy-9", IP: "10.0.0.9"})
		synctest.Wait()
		s := r.pub.State()
		if !s.Fenced || s.StaleRefusals != 1 || !strings.Contains(s.LastError, "carries term 5, the writer's term is 4") {
			t.Fatalf("state after fencing: %+v", s)
		}
		r.pods.SetPod(config.Pod{Namespace: "lb", Name: "haproxy-8", IP: "10.0.0.8"})
		synctest.Wait()
		if mem.Writes() != writes {
			t.Error("a fenced publisher wrote")
		}
		if s := r.pub.State(); s.StaleRefusals != 1 {
			t.Errorf("a fenced publisher kept trying: %d refusals", s.StaleRefusals)
		}
		// A later term of this replica (newer than 5) publishes again.
		r.lose(4)
		r.lead(6)
		if p := published(t, mem); p.Term != 6 {
			t.Errorf("term 6 did not publish: %+v", p)
		}
		if s := r.pub.State(); s.Fenced {
			t.Error("fencing carried over to the next term")
		}
	})
}

// flaky fails its first n Gets.
type flaky struct {
	*store.Memory
	n atomic.Int32
}

func (f *flaky) Get(ctx context.Context) (store.Object, error) {
	if f.n.Add(-1) >= 0 {
		return store.Object{}, errors.New("api server unavailable")
	}
	return f.Memory.Get(ctx)
}

func TestFailedWriteIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flaky{Memory: newMemory(t)}
		f.n.Store(2)
		r := newReplica(t, f, 3*time.Second)
		r.lead(2)
		if _, err := f.Memory.Get(t.Context()); !errors.Is(err, store.ErrNotFound) {
			t.Fatal("wrote through a failing store")
		}
		if s := r.pub.State(); s.Failures != 1 || s.LastError == "" {
			t.Errorf("state after a failure: %+v", s)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if s := r.pub.State(); s.Failures != 2 {
			t.Errorf("no retry after the interval: %+v", s)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if p := published(t, f.Memory); p.Term != 2 {
			t.Errorf("published %+v", p)
		}
	})
}

func TestStartOutsideATerm(t *testing.T) {
	bus := busevents.NewEventBusWithLogger(1, discard)
	pub, _ := configpublisher.New(bus, configpublisher.Options{Store: newMemory(t)})
	if err := pub.Start(t.Context()); !errors.Is(err, configpublisher.ErrNoTerm) {
		t.Errorf("Start without a term = %v, want ErrNoTerm", err)
	}
}

func TestNewChecksOptions(t *testing.T) {
	bus := busevents.NewEventBusWithLogger(1, discard)
	for _, tc := range []struct {
		bus  *busevents.EventBus
		opts configpublisher.Options
		want string
	}{
		{nil, configpublisher.Options{Store: newMemory(t)}, "configpublisher: bus is nil"},
		{bus, configpublisher.Options{}, "configpublisher: options: store is nil"},
		{bus, configpublisher.Options{Store: newMemory(t), RetryInterval: -1}, "configpublisher: options: retry interval is negative"},
	} {
		if _, err := configpublisher.New(tc.bus, tc.opts); err == nil || err.Error() != tc.want {
			t.Errorf("New = %v, want %q", err, tc.want)
		}
	}
	pub, _ := configpublisher.New(bus, configpublisher.Options{Store: newMemory(t)})
	if got := pub.RequiredState(); len(got) != 2 || got[0] != events.EventTypeConfigValidated || got[1] != events.EventTypeHAProxyPodsDiscovered {
		t.Errorf("RequiredState = %v", got)
	}
}
