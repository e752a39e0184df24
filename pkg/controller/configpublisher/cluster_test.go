package configpublisher_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/configchange"
	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/discovery"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	"github.com/baton-dev/baton/pkg/controller/store"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// process is one controller process for the failover test: its own bus,
// runtime, all-replica side and publisher, writing to a shared ConfigMap.
type process struct {
	bus    *busevents.EventBus
	cfg    *configchange.ConfigChangeHandler
	pods   *discovery.Discovery
	pub    *configpublisher.Component
	writes chan configpublisher.WriteReport
}

func startProcess(t *testing.T, identity string, s store.Store, pods []config.Pod) *process {
	t.Helper()
	p := &process{bus: busevents.NewEventBusWithLogger(64, discard), writes: make(chan configpublisher.WriteReport, 16)}
	m, err := lifecycle.NewManager(p.bus, lifecycle.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	if p.cfg, err = configchange.New(p.bus, configchange.Options{Source: configchange.Default(), Logger: discard}); err != nil {
		t.Fatal(err)
	}
	if p.pods, err = discovery.NewSimulated(p.bus, pods, discovery.Options{Logger: discard}); err != nil {
		t.Fatal(err)
	}
	p.pub, err = configpublisher.New(p.bus, configpublisher.Options{
		Store: s, Identity: identity, Logger: discard,
		OnWrite: func(r configpublisher.WriteReport) { p.writes <- r },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		m.AddAllReplica(p.cfg), m.AddAllReplica(p.pods), m.AddLeaderOnly(p.pub),
		m.AddReplayer("config", p.cfg.Replayer()), m.AddReplayer("pods", p.pods.Replayer()),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	p.bus.Start()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
		p.bus.Stop()
	})
	return p
}

func (p *process) write(t *testing.T) configpublisher.WriteReport {
	t.Helper()
	select {
	case r := <-p.writes:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no write within 30s")
		return configpublisher.WriteReport{}
	}
}

// TestFailoverOnConfigMap: the leader of term 5 publishes; a new leader takes
// over with term 6 and publishes its current state; the old leader, which
// has not noticed yet, is refused, and so is any write with the old term.
func TestFailoverOnConfigMap(t *testing.T) {
	env := batontest.StartEnv(t)
	newStore := func() store.Store {
		s, err := store.NewConfigMap(env.Clientset(), "default", "baton-published")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := startProcess(t, "replica-a", newStore(), []config.Pod{{Namespace: "lb", Name: "haproxy-0", IP: "10.0.0.1", Ready: true}})
	b := startProcess(t, "replica-b", newStore(), []config.Pod{
		{Namespace: "lb", Name: "haproxy-0", IP: "10.0.0.1", Ready: true},
		{Namespace: "lb", Name: "haproxy-1", IP: "10.0.0.2", Ready: true},
	})

	a.bus.Publish(events.NewBecameLeaderEvent("replica-a", 5))
	if r := a.write(t); r.Err != nil || r.Published.Term != 5 || r.Published.PublishedBy != "replica-a" {
		t.Fatalf("term 5 write: %+v", r)
	}

	b.bus.Publish(events.NewBecameLeaderEvent("replica-b", 6))
	r := b.write(t)
	cur, _ := b.cfg.Current()
	if r.Err != nil || r.Published.Term != 6 || r.Published.PublishedBy != "replica-b" ||
		r.Published.ConfigVersion != cur.Version || r.Published.PodGeneration != 1 || r.Published.Status != configpublisher.StatusValid {
		t.Fatalf("term 6 write: %+v", r)
	}

	// The deposed leader still runs its term and sees a change.
	a.pods.SetPod(config.Pod{Namespace: "lb", Name: "haproxy-9", IP: "10.0.0.9"})
	if r := a.write(t); !errors.Is(r.Err, configpublisher.ErrStaleTerm) {
		t.Fatalf("old leader's write: %+v, want ErrStaleTerm", r)
	}
	if s := a.pub.State(); !s.Fenced || s.StaleRefusals != 1 {
		t.Errorf("old leader's state: %+v", s)
	}

	// A write attempted with the old term, by anyone, is refused.
	_, err := configpublisher.Write(t.Context(), newStore(), configpublisher.Record{
		Term: 5, Status: configpublisher.StatusValid,
		Content: &configpublisher.Payload{Data: map[string]string{"config.yaml": "stale"}, ConfigVersion: "stale"},
	})
	if !errors.Is(err, configpublisher.ErrStaleTerm) {
		t.Fatalf("explicit write with term 5: %v, want ErrStaleTerm", err)
	}
	o, err := newStore().Get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := configpublisher.Decode(o)
	if p.Term != 6 || p.PublishedBy != "replica-b" || p.ConfigVersion != cur.Version {
		t.Errorf("object after the refused writes: %+v", p)
	}
}
