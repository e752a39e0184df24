package replicatest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ErrPartitioned is what a partitioned client's requests fail with.
var ErrPartitioned = errors.New("replicatest: partitioned")

// Partition is a switch that cuts a client off the API server: new requests fail at
// once; watches already open stay open, as a half-broken network may leave them.
type Partition struct{ cut atomic.Bool }

// Wrap returns a copy of cfg whose requests fail with ErrPartitioned while p is cut.
func (p *Partition) Wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if p.cut.Load() {
				return nil, ErrPartitioned
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

// Cut cuts the client off; Heal connects it again.
func (p *Partition) Cut()  { p.cut.Store(true) }
func (p *Partition) Heal() { p.cut.Store(false) }

// RoundTripFunc is a function that is an http.RoundTripper, for wrapping a client's
// transport (rest.Config.Wrap).
type RoundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// WaitFor polls cond every 5ms until it holds, or fails t after timeout. The tests use
// it only for state the replicas change on their own against a real API server.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Monitor watches the ConfigMaps of every namespace and records, per object, the term
// stamped in annotation. It fails the test (at Check, and in cleanup) when a stamp on
// an object ever goes below one seen before on it: a write of an ended term overwrote a
// newer term's.
type Monitor struct {
	annotation string

	// mu guards last and errs.
	mu   sync.Mutex
	last map[string]uint64
	errs []error
	seen int
}

// Watch starts a Monitor of the term annotation on ConfigMaps with cs.
func Watch(t testing.TB, cs kubernetes.Interface, annotation string) *Monitor {
	t.Helper()
	m := &Monitor{annotation: annotation, last: map[string]uint64{}}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cs.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatalf("replicatest: watching configmaps: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type != watch.Deleted {
				m.observe(cm)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
		if err := m.Err(); err != nil {
			t.Error(err)
		}
	})
	return m
}

func (m *Monitor) observe(cm *corev1.ConfigMap) {
	v, ok := cm.Annotations[m.annotation]
	if !ok {
		return
	}
	term, err := strconv.ParseUint(v, 10, 64)
	key := cm.Namespace + "/" + cm.Name
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen++
	switch {
	case err != nil:
		m.errs = append(m.errs, fmt.Errorf("%s: bad term stamp %q", key, v))
	case term < m.last[key]:
		m.errs = append(m.errs, fmt.Errorf("%s: term stamp went back from %d to %d (rv %s)", key, m.last[key], term, cm.ResourceVersion))
	default:
		m.last[key] = term
	}
}

// Err returns the violations seen so far, joined; nil if none.
func (m *Monitor) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return errors.Join(m.errs...)
}

// Seen returns how many stamped writes the monitor saw.
func (m *Monitor) Seen() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen
}
