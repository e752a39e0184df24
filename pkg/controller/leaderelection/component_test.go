package leaderelection_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leaderelection"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/leaderelection/leaderelectiontest"
	"github.com/baton-dev/baton/pkg/termctx"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func config(id string) k8sle.Config {
	return k8sle.Config{Identity: id, LeaseName: "baton", LeaseNamespace: "default", ReleaseOnCancel: true}
}

func TestNewRejectsBadInput(t *testing.T) {
	fieldsOf := func(err error) []string {
		var fields []string
		var walk func(error)
		walk = func(err error) {
			var ce *k8sle.ConfigError
			if errors.As(err, &ce) && errors.Unwrap(err) == k8sle.ErrInvalidConfig {
				fields = append(fields, ce.Field)
				return
			}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				for _, e := range j.Unwrap() {
					walk(e)
				}
			}
		}
		walk(err)
		return fields
	}
	bus := busevents.NewEventBus(0)
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"nil bus and clientset", func() error {
			_, err := leaderelection.New(config("a"), nil, nil, leaderelection.Callbacks{}, discard())
			return err
		}(), []string{"bus", "clientset"}},
		{"nil store", func() error {
			_, err := leaderelection.NewWithStore(config("a"), nil, bus, leaderelection.Callbacks{}, discard())
			return err
		}(), []string{"store"}},
		{"empty identity", func() error {
			_, err := leaderelection.NewWithStore(config(""), k8sle.NewMemoryStore("baton"), bus, leaderelection.Callbacks{}, discard())
			return err
		}(), []string{"Identity"}},
		{"nil bus only", func() error {
			_, err := leaderelection.NewWithStore(config("a"), k8sle.NewMemoryStore("baton"), nil, leaderelection.Callbacks{}, discard())
			return err
		}(), []string{"bus"}},
	} {
		if !errors.Is(tc.err, k8sle.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", tc.name, tc.err)
			continue
		}
		got := fieldsOf(tc.err)
		for _, f := range tc.want {
			if !strings.Contains(strings.Join(got, ","), f) {
				t.Errorf("%s: error %q names fields %v, want %s", tc.name, tc.err, got, f)
			}
		}
	}
	if _, err := leaderelection.New(config("a"), fake.NewClientset(), bus, leaderelection.Callbacks{}, nil); err != nil {
		t.Errorf("valid New: %v", err)
	}
	if err := func() error {
		_, err := leaderelection.New(config("a"), nil, nil, leaderelection.Callbacks{}, nil)
		return err
	}(); !strings.Contains(err.Error(), "leaderelection: bus is nil") {
		t.Errorf("message %q", err)
	}
}

// entry is one line of a replica's log: an event as published on its bus,
// or a callback as called.
type entry struct {
	kind     string // "started", "became", "lost", "observed", or "cb:" + callback
	term     uint64
	identity string
	reason   string
	self     bool
}

func (e entry) String() string {
	return fmt.Sprintf("%s(%d %s %s %v)", e.kind, e.term, e.identity, e.reason, e.self)
}

// replica is one candidate with its own bus.
type replica struct {
	t   *testing.T
	id  string
	bus *busevents.EventBus
	c   *leaderelection.Component
	ch  <-chan busevents.Event

	cancel context.CancelFunc
	done   chan error

	// mu serializes draining ch into log with appending callbacks, so the
	// log shows whether an event was published before a callback ran.
	mu  sync.Mutex
	log []entry
}

func newReplica(t *testing.T, id string, store k8sle.LeaseStore, edit func(*k8sle.Config)) *replica {
	t.Helper()
	r := &replica{t: t, id: id, bus: busevents.NewEventBusWithLogger(0, discard()), done: make(chan error, 1)}
	r.ch = busevents.Subscribe[busevents.Event](context.Background(), r.bus, "recorder", 4096, busevents.Types(
		events.EventTypeLeaderElectionStarted, events.EventTypeBecameLeader,
		events.EventTypeLostLeadership, events.EventTypeNewLeaderObserved,
	), busevents.Critical(func(d busevents.Drop) { t.Errorf("%s: recorder dropped %+v", id, d) }))
	r.bus.Start()
	cfg := config(id)
	if edit != nil {
		edit(&cfg)
	}
	c, err := leaderelection.NewWithStore(cfg, store, r.bus, leaderelection.Callbacks{
		OnStartedLeading: func(ctx context.Context) {
			term, _ := termctx.FromContext(ctx)
			r.record(entry{kind: "cb:started", term: term})
		},
		OnStoppedLeading: func() { r.record(entry{kind: "cb:stopped"}) },
		OnNewLeader:      func(identity string) { r.record(entry{kind: "cb:observed", identity: identity}) },
	}, discard())
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	return r
}

func (r *replica) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.c.Run(ctx) }()
}

// stop cancels Run and waits for it.
func (r *replica) stop() {
	r.t.Helper()
	r.cancel()
	if err := <-r.done; err != nil {
		r.t.Errorf("%s: Run: %v", r.id, err)
	}
	r.bus.Stop()
}

// record drains the events published so far, then appends e.
func (r *replica) record(e entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drainLocked()
	if e.kind != "" {
		r.log = append(r.log, e)
	}
}

func (r *replica) drainLocked() {
	for {
		select {
		case ev, ok := <-r.ch:
			if !ok {
				return
			}
			switch e := ev.(type) {
			case *events.LeaderElectionStartedEvent:
				r.log = append(r.log, entry{kind: "started", identity: e.Identity})
			case *events.BecameLeaderEvent:
				r.log = append(r.log, entry{kind: "became", term: e.Term, identity: e.Identity})
			case *events.LostLeadershipEvent:
				r.log = append(r.log, entry{kind: "lost", term: e.Term, identity: e.Identity, reason: e.Reason})
			case *events.NewLeaderObservedEvent:
				r.log = append(r.log, entry{kind: "observed", identity: e.Identity, self: e.IsSelf})
			}
		default:
			return
		}
	}
}

func (r *replica) entries() []entry {
	r.record(entry{})
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]entry(nil), r.log...)
}

// check verifies the log's invariants: LeaderElectionStartedEvent first;
// each callback preceded by its event; became/lost strictly alternating, a
// lost carrying its became's term, terms strictly increasing. It returns the
// terms led and the loss reasons.
func (r *replica) check() (terms []uint64, reasons []string) {
	r.t.Helper()
	log := r.entries()
	if len(log) == 0 || log[0].kind != "started" || log[0].identity != r.id {
		r.t.Fatalf("%s: log does not start with LeaderElectionStartedEvent: %v", r.id, log)
	}
	var leading bool
	var cur uint64
	becameSeen, lostSeen, stoppedCbs := 0, 0, 0
	var observed []string
	for i, e := range log {
		switch e.kind {
		case "became":
			if leading {
				r.t.Errorf("%s: BecameLeader(%d) while term %d runs: %v", r.id, e.term, cur, log)
			}
			if e.term <= cur {
				r.t.Errorf("%s: term %d after %d", r.id, e.term, cur)
			}
			if e.identity != r.id {
				r.t.Errorf("%s: BecameLeader with identity %q", r.id, e.identity)
			}
			leading, cur = true, e.term
			becameSeen++
			terms = append(terms, e.term)
		case "cb:started":
			// The term may already be over (the elector calls
			// OnStartedLeading in a goroutine), but its event came first.
			if e.term != cur {
				r.t.Errorf("%s: OnStartedLeading(term %d) at %d not preceded by its BecameLeaderEvent: %v", r.id, e.term, i, log)
			}
		case "lost":
			if !leading || e.term != cur {
				r.t.Errorf("%s: LostLeadership(%d) without BecameLeader of that term (current %d, leading %v)", r.id, e.term, cur, leading)
			}
			leading = false
			lostSeen++
			reasons = append(reasons, e.reason)
		case "cb:stopped":
			stoppedCbs++
			if stoppedCbs > lostSeen {
				r.t.Errorf("%s: OnStoppedLeading #%d at %d before its LostLeadershipEvent: %v", r.id, stoppedCbs, i, log)
			}
		case "observed":
			observed = append(observed, e.identity)
			if e.self != (e.identity == r.id) {
				r.t.Errorf("%s: NewLeaderObserved(%s) IsSelf %v", r.id, e.identity, e.self)
			}
		case "cb:observed":
			if len(observed) == 0 || observed[len(observed)-1] != e.identity {
				r.t.Errorf("%s: OnNewLeader(%s) not preceded by its event (seen %v)", r.id, e.identity, observed)
			}
		}
	}
	if becameSeen != lostSeen && !(becameSeen == lostSeen+1 && leading) {
		r.t.Errorf("%s: %d BecameLeader, %d Lost", r.id, becameSeen, lostSeen)
	}
	return terms, reasons
}

func TestEventsPrecedeCallbacks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := k8sle.NewMemoryStore("baton")
		r := newReplica(t, "a", store, nil)
		if r.c.Name() != "leader-election" {
			t.Errorf("Name() = %q", r.c.Name())
		}
		r.start()
		time.Sleep(time.Second)
		synctest.Wait()
		if !r.c.Elector().IsLeader() || r.c.Elector().GetLeader() != "a" || r.c.Elector().Term() == 0 || r.c.Elector().Healthy() != nil {
			t.Fatalf("not leading: leader %q term %d healthy %v", r.c.Elector().GetLeader(), r.c.Elector().Term(), r.c.Elector().Healthy())
		}
		term := r.c.Elector().Term()
		if ctx, ok := r.c.TermContext(term); !ok || ctx.Err() != nil {
			t.Errorf("TermContext(%d) = %v, %v", term, ctx, ok)
		}
		if _, ok := r.c.TermContext(term + 1); ok {
			t.Error("TermContext of another term")
		}
		if err := r.c.Run(context.Background()); !errors.Is(err, k8sle.ErrAlreadyStarted) {
			t.Errorf("second Run: %v", err)
		}
		r.stop()
		terms, reasons := r.check()
		if len(terms) != 1 || terms[0] != term {
			t.Errorf("terms %v, want [%d]", terms, term)
		}
		if len(reasons) != 1 || reasons[0] != leaderelection.ReasonContextCancelled {
			t.Errorf("reasons %q", reasons)
		}
		if _, ok := r.c.TermContext(term); ok {
			t.Error("TermContext after the term ended")
		}
		log := r.entries()
		starts := 0
		for _, e := range log {
			if e.kind == "started" {
				starts++
			}
		}
		if starts != 1 {
			t.Errorf("%d LeaderElectionStartedEvents (the second Run must publish none)", starts)
		}
	})
}

// TestReCampaignAfterLosses: the leader loses its lease to an intruder, to
// a delete, and to its own missed renew deadline; each time it publishes
// LostLeadership with the reason and leads again in place with a higher term.
func TestReCampaignAfterLosses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := k8sle.NewMemoryStore("baton")
		store := &flakyStore{MemoryStore: mem}
		r := newReplica(t, "a", store, nil)
		r.start()
		time.Sleep(time.Second)
		if !r.c.Elector().IsLeader() {
			t.Fatal("not leading")
		}

		// 1. An intruder overwrites the lease; it never renews, so after three times
		// its LeaseDuration (not a Baton holder) a re-acquires.
		cur, err := mem.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		cur.HolderIdentity = "intruder"
		cur.LeaseTransitions++
		leaderelectiontest.Set(mem, cur)
		time.Sleep(3*k8sle.DefaultLeaseDuration + 5*time.Second)
		if !r.c.Elector().IsLeader() {
			t.Fatal("did not re-acquire after the intruder's lease expired")
		}

		// 2. The lease is deleted by hand.
		leaderelectiontest.Delete(mem)
		time.Sleep(5 * time.Second)
		if !r.c.Elector().IsLeader() {
			t.Fatal("did not re-acquire after the delete")
		}

		// 3. Renews fail past RenewDeadline; then the store heals.
		store.failing.Store(true)
		time.Sleep(k8sle.DefaultRenewDeadline + time.Second)
		synctest.Wait()
		if r.c.Elector().IsLeader() {
			t.Fatal("still leading with failing renews")
		}
		store.failing.Store(false)
		time.Sleep(30 * time.Second)
		if !r.c.Elector().IsLeader() {
			t.Fatal("did not lead again after the store healed")
		}
		r.stop()

		terms, reasons := r.check()
		t.Logf("terms %v, reasons %q", terms, reasons)
		want := []string{
			leaderelection.ReasonLeaseTakenPrefix + "intruder",
			leaderelection.ReasonLeaseCleared,
			leaderelection.ReasonRenewDeadlineMissed,
			leaderelection.ReasonContextCancelled,
		}
		if strings.Join(reasons, "|") != strings.Join(want, "|") {
			t.Errorf("reasons %q, want %q", reasons, want)
		}
		if len(terms) != 4 {
			t.Errorf("terms %v, want 4 increasing", terms)
		}
		var sawIntruder bool
		for _, e := range r.entries() {
			if e.kind == "observed" && e.identity == "intruder" && !e.self {
				sawIntruder = true
			}
		}
		if !sawIntruder {
			t.Error("no NewLeaderObservedEvent for the intruder")
		}
	})
}

// flakyStore fails updates while failing is set.
type flakyStore struct {
	*k8sle.MemoryStore
	failing atomic.Bool
}

var errUnavailable = errors.New("store unavailable")

func (s *flakyStore) Update(ctx context.Context, r k8sle.LeaseRecord) (k8sle.LeaseRecord, error) {
	if s.failing.Load() {
		return k8sle.LeaseRecord{}, errUnavailable
	}
	return s.MemoryStore.Update(ctx, r)
}

func (s *flakyStore) Get(ctx context.Context) (k8sle.LeaseRecord, error) {
	if s.failing.Load() {
		return k8sle.LeaseRecord{}, errUnavailable
	}
	return s.MemoryStore.Get(ctx)
}

// TestFailoverAcrossReplicas: three replicas, each with its own bus, share
// one lease; the leader is shut down (releasing) three times and restarted.
// Each bus sees one BecameLeader/Lost pair per term, and the terms increase
// across all replicas.
func TestFailoverAcrossReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := k8sle.NewMemoryStore("baton")
		ids := []string{"a", "b", "c"}
		reps := map[string]*replica{}
		var all []*replica
		for _, id := range ids {
			reps[id] = newReplica(t, id, store, nil)
			reps[id].start()
			all = append(all, reps[id])
		}
		leader := func() *replica {
			var out *replica
			for _, r := range reps {
				if r.c.Elector().IsLeader() {
					if out != nil {
						t.Fatalf("two leaders: %s and %s", out.id, r.id)
					}
					out = r
				}
			}
			return out
		}
		var order []uint64
		for round := range 3 {
			time.Sleep(2 * time.Second)
			l := leader()
			if l == nil {
				t.Fatalf("round %d: no leader", round)
			}
			order = append(order, l.c.Elector().Term())
			for _, r := range reps {
				if got := r.c.Elector().GetLeader(); got != l.id {
					t.Errorf("round %d: %s sees leader %q, want %q", round, r.id, got, l.id)
				}
			}
			l.stop()
			// The same identity comes back as a new candidate.
			nr := newReplica(t, l.id, store, nil)
			nr.start()
			reps[l.id] = nr
			all = append(all, nr)
		}
		time.Sleep(2 * time.Second)
		last := leader()
		if last == nil {
			t.Fatal("no leader at the end")
		}
		order = append(order, last.c.Elector().Term())
		// Followers first, so that the last release starts no new term.
		for _, r := range reps {
			if r != last {
				r.stop()
			}
		}
		last.stop()
		t.Logf("leaders' terms %v", order)
		for i := 1; i < len(order); i++ {
			if order[i] <= order[i-1] {
				t.Errorf("terms not increasing across failovers: %v", order)
			}
		}
		var total int
		for _, r := range all {
			terms, reasons := r.check()
			t.Logf("%s: terms %v reasons %q", r.id, terms, reasons)
			total += len(terms)
			for _, reason := range reasons {
				if reason != leaderelection.ReasonContextCancelled {
					t.Errorf("%s: unexpected reason %q", r.id, reason)
				}
			}
		}
		if total != len(order) {
			t.Errorf("%d terms on the buses, %d observed", total, len(order))
		}
	})
}

// TestDrivesLifecycleManager wires the adapter to the controller runtime on
// one bus: the leader-only component runs with the elector's term and stops
// with it.
func TestDrivesLifecycleManager(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := busevents.NewEventBusWithLogger(0, discard())
		store := k8sle.NewMemoryStore("baton")
		var le *leaderelection.Component
		ready := make(chan lifecycle.TermReport, 4)
		m, err := lifecycle.NewManager(bus, lifecycle.Options{
			Logger:      discard(),
			OnTermReady: func(r lifecycle.TermReport) { ready <- r },
			TermContext: func(term uint64) (context.Context, bool) { return le.TermContext(term) },
		})
		if err != nil {
			t.Fatal(err)
		}
		le, err = leaderelection.NewWithStore(config("a"), store, bus, leaderelection.Callbacks{}, discard())
		if err != nil {
			t.Fatal(err)
		}
		terms := make(chan uint64, 4)
		worker := workerComponent{terms: terms}
		if err := errors.Join(m.AddAllReplica(le), m.AddLeaderOnly(worker)); err != nil {
			t.Fatal(err)
		}
		bus.Start()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		rep := <-ready
		if got := <-terms; got != rep.Term || got != le.Elector().Term() {
			t.Errorf("worker ran in term %d, report %d, elector %d", got, rep.Term, le.Elector().Term())
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		s := m.Status()
		if cs, _ := s.Component("worker"); cs.State != lifecycle.StateStopped {
			t.Errorf("worker %+v", cs)
		}
		if cs, _ := s.Component("leader-election"); cs.State != lifecycle.StateStopped {
			t.Errorf("elector component %+v", cs)
		}
		bus.Stop()
	})
}

type workerComponent struct{ terms chan uint64 }

func (workerComponent) Name() string { return "worker" }

func (w workerComponent) Start(ctx context.Context) error {
	term, _ := termctx.FromContext(ctx)
	lifecycle.Subscribed(ctx)
	w.terms <- term
	<-ctx.Done()
	return ctx.Err()
}

// TestLostNeverPrecedesBecame: with a context already cancelled, the
// elector may call OnStoppedLeading before the term's OnStartedLeading
// goroutine ran; the LostLeadershipEvent must still follow the
// BecameLeaderEvent of its term.
func TestLostNeverPrecedesBecame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for i := range 200 {
			r := newReplica(t, "solo", nil, func(c *k8sle.Config) { *c = k8sle.Config{SingleReplica: true, Identity: c.Identity} })
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := r.c.Run(ctx); err != nil {
				t.Fatal(err)
			}
			terms, reasons := r.check()
			if len(terms) != 1 || terms[0] != 1 || len(reasons) != 1 || reasons[0] != leaderelection.ReasonContextCancelled {
				t.Fatalf("iteration %d: terms %v reasons %q: %v", i, terms, reasons, r.entries())
			}
			r.bus.Stop()
		}
	})
}

// TestHandOver: HandOver moves the lease to the named replica; the old
// leader's LostLeadershipEvent carries ReasonHandedOver, and the new one's
// BecameLeaderEvent follows with a higher term.
func TestHandOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := k8sle.NewMemoryStore("baton")
		a := newReplica(t, "a", store, nil)
		a.start()
		time.Sleep(time.Second)
		b := newReplica(t, "b", store, nil)
		b.start()
		time.Sleep(time.Second)
		if err := b.c.Elector().HandOver(context.Background(), "a"); !errors.Is(err, k8sle.ErrNotLeader) {
			t.Fatalf("follower HandOver = %v, want ErrNotLeader", err)
		}
		term := a.c.Elector().Term()
		if err := a.c.Elector().HandOver(context.Background(), "b"); err != nil {
			t.Fatalf("HandOver: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
		if !b.c.Elector().IsLeader() || b.c.Elector().Term() <= term || a.c.Elector().IsLeader() {
			t.Fatalf("after HandOver: a leads %v, b leads %v with term %d (a's was %d)", a.c.Elector().IsLeader(), b.c.Elector().IsLeader(), b.c.Elector().Term(), term)
		}
		if st := a.c.Elector().Stats(); st.HandOvers != 1 {
			t.Errorf("a: stats %+v", st)
		}
		b.stop()
		a.stop()
		// b released on stop, so a may have led again until its own stop.
		if _, reasons := a.check(); len(reasons) == 0 || reasons[0] != leaderelection.ReasonHandedOver {
			t.Errorf("a: reasons %q, want %q", reasons, leaderelection.ReasonHandedOver)
		}
		if terms, _ := b.check(); len(terms) != 1 {
			t.Errorf("b: terms %v, want one", terms)
		}
	})
}
