package demo

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/baton-dev/baton/pkg/controller/store"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// errKilled is what a killed replica's store calls return.
var errKilled = errors.New("demo: replica killed")

// gate stands between one replica and the shared stores: open, paused
// (calls block until resumed, whatever their context says) or killed
// (calls fail).
type gate struct {
	// mu guards the fields below.
	mu     sync.Mutex
	paused chan struct{} // non-nil while paused; closed by resume
	killed bool
}

// pass blocks while the gate is paused and reports errKilled once killed.
func (g *gate) pass() error {
	for {
		g.mu.Lock()
		if g.killed {
			g.mu.Unlock()
			return errKilled
		}
		p := g.paused
		g.mu.Unlock()
		if p == nil {
			return nil
		}
		<-p
	}
}

func (g *gate) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused == nil && !g.killed {
		g.paused = make(chan struct{})
	}
}

func (g *gate) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused != nil {
		close(g.paused)
		g.paused = nil
	}
}

func (g *gate) kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.killed = true
	if g.paused != nil {
		close(g.paused)
		g.paused = nil
	}
}

func (g *gate) isPaused() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.paused != nil
}

// gatedLeases is a replica's view of the shared lease store, through its
// gate. It also reports the send time of each of the replica's own writes
// that succeeded, by the resourceVersion it got: a term is numbered by the
// resourceVersion of its acquiring write, so the run knows when each term's
// acquisition was sent.
type gatedLeases struct {
	inner    k8sle.LeaseStore
	gate     *gate
	identity string
	onWrite  func(resourceVersion string, sent time.Time)
}

func (s *gatedLeases) String() string { return s.inner.String() }

func (s *gatedLeases) Get(ctx context.Context) (k8sle.LeaseRecord, error) {
	if err := s.gate.pass(); err != nil {
		return k8sle.LeaseRecord{}, err
	}
	return s.inner.Get(ctx)
}

func (s *gatedLeases) Create(ctx context.Context, r k8sle.LeaseRecord) (k8sle.LeaseRecord, error) {
	sent := time.Now()
	if err := s.gate.pass(); err != nil {
		return k8sle.LeaseRecord{}, err
	}
	out, err := s.inner.Create(ctx, r)
	s.wrote(out, err, sent)
	return out, err
}

func (s *gatedLeases) Update(ctx context.Context, r k8sle.LeaseRecord) (k8sle.LeaseRecord, error) {
	sent := time.Now()
	if err := s.gate.pass(); err != nil {
		return k8sle.LeaseRecord{}, err
	}
	out, err := s.inner.Update(ctx, r)
	s.wrote(out, err, sent)
	return out, err
}

func (s *gatedLeases) wrote(out k8sle.LeaseRecord, err error, sent time.Time) {
	if err == nil && out.HolderIdentity == s.identity && s.onWrite != nil {
		s.onWrite(out.ResourceVersion, sent)
	}
}

// Watch opens the inner watch through the gate and passes its events on
// through a goroutine that waits at the gate before each one: a paused
// replica sees nothing new until it resumes. The goroutine closes the
// returned channel once the inner one is closed (ctx ended or the watch
// broke); a killed replica's goroutine only drains.
func (s *gatedLeases) Watch(ctx context.Context) (<-chan k8sle.LeaseEvent, error) {
	if err := s.gate.pass(); err != nil {
		return nil, err
	}
	in, err := s.inner.Watch(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan k8sle.LeaseEvent, 1)
	go func() {
		defer close(out)
		for ev := range in {
			if s.gate.pass() != nil {
				continue
			}
			select {
			case out <- ev:
			case <-ctx.Done():
			}
		}
	}()
	return out, nil
}

// gatedStore is a replica's view of the shared published object.
type gatedStore struct {
	inner store.Store
	gate  *gate
}

func (s *gatedStore) String() string { return s.inner.String() }

func (s *gatedStore) Get(ctx context.Context) (store.Object, error) {
	if err := s.gate.pass(); err != nil {
		return store.Object{}, err
	}
	return s.inner.Get(ctx)
}

func (s *gatedStore) Create(ctx context.Context, o store.Object) (store.Object, error) {
	if err := s.gate.pass(); err != nil {
		return store.Object{}, err
	}
	return s.inner.Create(ctx, o)
}

func (s *gatedStore) Update(ctx context.Context, o store.Object) (store.Object, error) {
	if err := s.gate.pass(); err != nil {
		return store.Object{}, err
	}
	return s.inner.Update(ctx, o)
}
