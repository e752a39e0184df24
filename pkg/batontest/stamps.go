package batontest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// StampMonitor watches the ConfigMaps of every namespace and records, per object, the
// term stamped in an annotation. It fails the test (in cleanup; Err says so before)
// when a stamp on an object ever goes below one seen before on it: a write of an ended
// term overwrote a newer term's.
type StampMonitor struct {
	annotation string

	// mu guards the fields below.
	mu   sync.Mutex
	last map[string]uint64
	errs []error
	seen int
}

// WatchStamps starts a StampMonitor of the term annotation on ConfigMaps with cs,
// until the end of t.
func WatchStamps(t testing.TB, cs kubernetes.Interface, annotation string) *StampMonitor {
	t.Helper()
	m := &StampMonitor{annotation: annotation, last: map[string]uint64{}}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cs.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatalf("batontest: watching configmaps: %v", err)
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

func (m *StampMonitor) observe(cm *corev1.ConfigMap) {
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
func (m *StampMonitor) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return errors.Join(m.errs...)
}

// Seen returns how many stamped writes the monitor saw.
func (m *StampMonitor) Seen() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen
}
