package app_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-dev/baton/pkg/controller/app"
	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var discard = slog.New(slog.DiscardHandler)

// The short timings of the tests: lease 1s, renew deadline 700ms, retry 200ms.
const (
	lease = time.Second
	renew = 700 * time.Millisecond
	retry = 200 * time.Millisecond
)

func pods(gen int, n int) []config.Pod {
	out := make([]config.Pod, n)
	for i := range out {
		out[i] = config.Pod{Namespace: "web", Name: fmt.Sprintf("haproxy-%d", i), IP: fmt.Sprintf("10.%d.0.%d", gen, i+1), Ready: true}
	}
	return out
}

func configDoc(maxConn int) []byte {
	return []byte(strings.Replace(config.DefaultYAML, "maxConn: 2000", fmt.Sprintf("maxConn: %d", maxConn), 1))
}

func version(t testing.TB, raw []byte) string {
	t.Helper()
	_, v, err := config.Load(raw)
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	return v
}

func newWorld(t *testing.T) *app.Embedded {
	t.Helper()
	w, err := app.NewEmbedded(app.EmbeddedOptions{Config: configDoc(2000), Pods: pods(1, 2)})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// node is a running replica and what a test observes of it.
type node struct {
	r        *app.Replica
	cancel   context.CancelFunc
	err      chan error
	stopOnce sync.Once
	rendered <-chan *events.TemplateRenderedEvent
	// dead makes every lease store call fail, as for a crashed process.
	dead atomic.Bool

	mu    sync.Mutex
	ready []lifecycle.TermReport
	takes []k8sle.LeaseRecord // previous records of takeovers
}

func startNode(t *testing.T, w *app.Embedded, id string, change func(*app.Options)) *node {
	t.Helper()
	n := &node{err: make(chan error, 1)}
	opts := w.Options(id)
	opts.LeaseStore = &killable{LeaseStore: opts.LeaseStore, dead: &n.dead}
	opts.Election.LeaseDuration, opts.Election.RenewDeadline, opts.Election.RetryPeriod = lease, renew, retry
	opts.StopTimeout = time.Second
	opts.Logger = discard
	opts.Scheduler.MinInterval = 100 * time.Millisecond
	opts.Hooks.OnTermReady = func(rep lifecycle.TermReport) {
		n.mu.Lock()
		n.ready = append(n.ready, rep)
		n.mu.Unlock()
	}
	opts.Hooks.OnTakeover = func(prev, _ k8sle.LeaseRecord) {
		n.mu.Lock()
		n.takes = append(n.takes, prev)
		n.mu.Unlock()
	}
	if change != nil {
		change(&opts)
	}
	r, err := app.New(opts)
	if err != nil {
		t.Fatalf("New(%s): %v", id, err)
	}
	n.r = r
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	n.rendered = busevents.Subscribe[*events.TemplateRenderedEvent](ctx, r.Bus(), "test-rendered", 64)
	go func() { n.err <- r.Run(ctx) }()
	t.Cleanup(func() { n.stop(t) })
	return n
}

// stop cancels the node and waits for Run. A crashed node's elector fails
// to release, and says so; that is expected.
func (n *node) stop(t *testing.T) {
	t.Helper()
	n.stopOnce.Do(func() {
		n.cancel()
		if err := <-n.err; err != nil && !n.dead.Load() {
			t.Errorf("%s: Run = %v", n.r.Identity(), err)
		}
	})
}

var errDead = errors.New("test: process is dead")

// killable is a lease store that fails every call once dead is set.
type killable struct {
	k8sle.LeaseStore
	dead *atomic.Bool
}

func (k *killable) Get(ctx context.Context) (k8sle.LeaseRecord, error) {
	if k.dead.Load() {
		return k8sle.LeaseRecord{}, errDead
	}
	return k.LeaseStore.Get(ctx)
}

func (k *killable) Create(ctx context.Context, r k8sle.LeaseRecord) (k8sle.LeaseRecord, error) {
	if k.dead.Load() {
		return k8sle.LeaseRecord{}, errDead
	}
	return k.LeaseStore.Create(ctx, r)
}

func (k *killable) Update(ctx context.Context, r k8sle.LeaseRecord) (k8sle.LeaseRecord, error) {
	if k.dead.Load() {
		return k8sle.LeaseRecord{}, errDead
	}
	return k.LeaseStore.Update(ctx, r)
}

// firstRender returns the first render of term seen by the node.
func (n *node) firstRender(t *testing.T, term uint64) *events.TemplateRenderedEvent {
	t.Helper()
	for {
		select {
		case e := <-n.rendered:
			if e.Term == term {
				return e
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no render of term %d", n.r.Identity(), term)
			return nil
		}
	}
}

// eventually polls cond on the bubble's clock.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// leaderOf waits for exactly one of ns to lead with its term ready.
func leaderOf(t *testing.T, ns ...*node) *node {
	t.Helper()
	var l *node
	eventually(t, "a ready leader", func() bool {
		l = nil
		count := 0
		for _, n := range ns {
			if st := n.r.Manager().Status(); st.Leading && st.TermReady {
				l = n
				count++
			}
		}
		return count == 1
	})
	return l
}

func published(t *testing.T, w *app.Embedded) configpublisher.Published {
	t.Helper()
	o, err := w.Published.Get(context.Background())
	if err != nil {
		return configpublisher.Published{}
	}
	p, err := configpublisher.Decode(o)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return p
}

// TestEmbeddedFailover runs three replicas of one embedded world through
// a graceful hand-over and a crash, with changes made while nobody leads:
// each new leader's first render and published object carry the newest
// state and its greater term, and a write with the old term is refused.
func TestEmbeddedFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		ns := []*node{startNode(t, w, "a", nil), startNode(t, w, "b", nil), startNode(t, w, "c", nil)}
		l1 := leaderOf(t, ns...)
		st := l1.r.Manager().Status()
		v1 := version(t, configDoc(2000))
		first := l1.firstRender(t, st.Term)
		if first.ConfigVersion != v1 || !strings.Contains(first.Output, "10.1.0.2:8080") {
			t.Errorf("first render of term %d: version %s, output\n%s", st.Term, first.ConfigVersion, first.Output)
		}
		eventually(t, "the first publish", func() bool { return published(t, w).Term == st.Term })
		if p := published(t, w); p.ConfigVersion != v1 || p.PublishedBy != l1.r.Identity() || p.Status != configpublisher.StatusValid {
			t.Errorf("published %+v", p)
		}
		if d := l1.r.Scheduler().State(); d.Term != st.Term || d.Last.ConfigVersion != v1 {
			t.Errorf("scheduler state %+v", d)
		}

		// A crash: the leader's lease is not released, so the others wait
		// for it to expire; meanwhile the configuration and pods change.
		crashed := []*node{}
		others := func(gone ...*node) []*node {
			var out []*node
			for _, n := range ns {
				skip := false
				for _, g := range gone {
					skip = skip || g == n
				}
				if !skip {
					out = append(out, n)
				}
			}
			return out
		}
		prevTerm := st.Term
		for round, fault := range []string{"crash", "release"} {
			old := leaderOf(t, others(crashed...)...)
			oldTerm := old.r.Manager().Status().Term
			if oldTerm < prevTerm {
				t.Fatalf("term went back: %d after %d", oldTerm, prevTerm)
			}
			raw := configDoc(3000 + round)
			change := func() {
				w.Config.Set(raw)
				if err := w.Pods.Set(pods(2+round, 3)); err != nil {
					t.Fatal(err)
				}
				synced(t, raw, pods(2+round, 3), others(append(crashed, old)...)...)
			}
			switch fault {
			case "crash":
				// No more lease writes, so that its shutdown cannot release:
				// the lease is left held, as by a crashed process, and the
				// changes are made while nobody leads.
				old.dead.Store(true)
				old.stop(t)
				change()
			case "release":
				// The hand-over is at once: change first.
				change()
				old.stop(t)
			}
			crashed = append(crashed, old)
			l := leaderOf(t, others(crashed...)...)
			term := l.r.Manager().Status().Term
			if term <= oldTerm {
				t.Fatalf("%s: new term %d not above %d", fault, term, oldTerm)
			}
			want := version(t, raw)
			cur, _ := l.r.Discovery().Current()
			r := l.firstRender(t, term)
			if r.ConfigVersion != want || r.PodGeneration != cur.Generation || !strings.Contains(r.Output, fmt.Sprintf("10.%d.0.3:8080", 2+round)) {
				t.Errorf("%s: first render of term %d from %s/%d, want %s/%d:\n%s", fault, term, r.ConfigVersion, r.PodGeneration, want, cur.Generation, r.Output)
			}
			eventually(t, "the new leader's publish", func() bool {
				p := published(t, w)
				return p.Term == term && p.ConfigVersion == want
			})
			// What is published is the render.
			if p := published(t, w); p.Data[configpublisher.KeyRendered] != r.Output || p.PodGeneration != r.PodGeneration {
				t.Errorf("%s: published %q (generation %d), want the first render of the term", fault, p.Data, p.PodGeneration)
			}
			// The old term is fenced off.
			_, err := configpublisher.Write(context.Background(), w.Published, configpublisher.Record{
				Term: oldTerm, Identity: old.r.Identity(), Status: configpublisher.StatusValid,
				Content: &configpublisher.Payload{Data: map[string]string{"x": "stale"}, ConfigVersion: "stale"},
			})
			if !errors.Is(err, configpublisher.ErrStaleTerm) {
				t.Errorf("%s: write with old term %d: %v, want ErrStaleTerm", fault, oldTerm, err)
			}
			if p := published(t, w); p.Term != term || p.ConfigVersion != want {
				t.Errorf("%s: the stale write changed the object: %+v", fault, p)
			}
			// The takeover saw the previous holder: the crashed leader, or
			// nobody after a release.
			wantPrev := map[string]string{"crash": old.r.Identity(), "release": ""}[fault]
			l.mu.Lock()
			takes := append([]k8sle.LeaseRecord(nil), l.takes...)
			l.mu.Unlock()
			if len(takes) != 1 || takes[0].HolderIdentity != wantPrev || takes[0].RenewTime.IsZero() {
				t.Errorf("%s: takeovers %+v, want one from %q", fault, takes, wantPrev)
			}
			t.Logf("%s of %s (term %d): %s leads term %d, first render %s/%d", fault, old.r.Identity(), oldTerm, l.r.Identity(), term, r.ConfigVersion, r.PodGeneration)
			prevTerm = term
		}
	})
}

// synced waits until the all-replica side of every node holds the
// configuration raw and the pods.
func synced(t *testing.T, raw []byte, pods []config.Pod, ns ...*node) {
	t.Helper()
	want := version(t, raw)
	eventually(t, "the all-replica side to sync", func() bool {
		for _, n := range ns {
			cfg, ok := n.r.ConfigHandler().Current()
			cur, ok2 := n.r.Discovery().Current()
			if !ok || !ok2 || cfg.Version != want || !slices.Equal(cur.Pods, pods) {
				return false
			}
		}
		return true
	})
}
