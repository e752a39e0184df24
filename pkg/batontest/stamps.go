package batontest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// StampMonitor watches the objects of one kind in every namespace and records, per
// object, the term stamped in an annotation. It fails the test (in cleanup; Err says
// so before) when a stamp on an object ever goes below one seen before on it: a write
// of an ended term overwrote a newer term's.
//
// It sees what one watch delivers: if the watch ends before the test does (the API
// server was stopped), later writes are not checked.
type StampMonitor struct {
	annotation string

	// mu guards the fields below.
	mu   sync.Mutex
	last map[string]uint64
	errs []error
	seen int
}

// WatchStamps starts a StampMonitor of the term annotation on ConfigMaps with cs,
// until the end of t. [WatchStampsOf] watches any other kind.
func WatchStamps(t testing.TB, cs kubernetes.Interface, annotation string) *StampMonitor {
	t.Helper()
	return watchStamps(t, "configmaps", annotation, func(ctx context.Context) (watch.Interface, error) {
		return cs.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{})
	})
}

// WatchStampsOf starts a StampMonitor of the term annotation on the objects of kind
// gvk (a built-in kind or a custom resource the API server serves, such as one
// installed with [WithCRDs]), through the API server that cfg reaches, until the end
// of t. It watches the objects' metadata only. It fails t when the API server does
// not serve gvk.
func WatchStampsOf(t testing.TB, cfg *rest.Config, gvk schema.GroupVersionKind, annotation string) *StampMonitor {
	t.Helper()
	gvr, err := resourceOf(cfg, gvk)
	if err != nil {
		t.Fatalf("batontest: %v", err)
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("batontest: metadata client: %v", err)
	}
	return watchStamps(t, gvr.Resource, annotation, func(ctx context.Context) (watch.Interface, error) {
		return mc.Resource(gvr).Namespace(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{})
	})
}

// resourceOf asks the API server's discovery for the resource of gvk.
func resourceOf(cfg *rest.Config, gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("discovery client: %w", err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("discovery of %s: %w", gvk, err)
	}
	m, err := restmapper.NewDiscoveryRESTMapper(groups).RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("the API server does not serve %s: %w", gvk, err)
	}
	return m.Resource, nil
}

// watchStamps runs the monitor over the watch that open starts, until the end of t.
func watchStamps(t testing.TB, what, annotation string, open func(context.Context) (watch.Interface, error)) *StampMonitor {
	t.Helper()
	m := &StampMonitor{annotation: annotation, last: map[string]uint64{}}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := open(ctx)
	if err != nil {
		cancel()
		t.Fatalf("batontest: watching %s: %v", what, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				continue
			}
			if obj, err := meta.Accessor(ev.Object); err == nil {
				m.observe(obj)
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

func (m *StampMonitor) observe(obj metav1.Object) {
	v, ok := obj.GetAnnotations()[m.annotation]
	if !ok {
		return
	}
	term, err := strconv.ParseUint(v, 10, 64)
	key := obj.GetNamespace() + "/" + obj.GetName()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen++
	switch {
	case err != nil:
		m.errs = append(m.errs, fmt.Errorf("%s: bad term stamp %q", key, v))
	case term < m.last[key]:
		m.errs = append(m.errs, fmt.Errorf("%s: term stamp went back from %d to %d (rv %s)", key, m.last[key], term, obj.GetResourceVersion()))
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
