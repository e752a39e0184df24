package batontest_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/baton-dev/baton/pkg/batontest"
)

// widgetGVK is the kind of testdata/crds.
var widgetGVK = schema.GroupVersionKind{Group: "test.baton.dev", Version: "v1", Kind: "Widget"}

var widgets = schema.GroupVersionResource{Group: "test.baton.dev", Version: "v1", Resource: "widgets"}

// stampWidget creates the Widget default/name with the term stamp "t" or, when it
// exists, sets its stamp.
func stampWidget(ctx context.Context, cfg *rest.Config, name string, term int) error {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	res := dc.Resource(widgets).Namespace("default")
	w, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		w = &unstructured.Unstructured{}
		w.SetGroupVersionKind(widgetGVK)
		w.SetName(name)
		w.SetAnnotations(map[string]string{"t": fmt.Sprint(term)})
		_, err = res.Create(ctx, w, metav1.CreateOptions{})
		return err
	}
	w.SetAnnotations(map[string]string{"t": fmt.Sprint(term)})
	_, err = res.Update(ctx, w, metav1.UpdateOptions{})
	return err
}

// TestCRDsInstalledAndStampsOfAnyKind: WithCRDs installs a directory's CRDs before
// StartEnv returns, and WatchStampsOf checks the stamps on their objects.
func TestCRDsInstalledAndStampsOfAnyKind(t *testing.T) {
	env := batontest.StartEnv(t, batontest.WithCRDs(filepath.Join("testdata", "crds")))
	if crds := env.CRDs(); len(crds) != 1 || crds[0].Name != "widgets.test.baton.dev" {
		t.Fatalf("installed CRDs %v, want widgets.test.baton.dev", crds)
	}
	ctx := t.Context()
	// Created at once: StartEnv waited until the API server serves the kind.
	if err := stampWidget(ctx, env.Config(), "a", 1); err != nil {
		t.Fatalf("create a Widget right after StartEnv: %v", err)
	}
	rec := &recordingTB{TB: t}
	m := batontest.WatchStampsOf(rec, env.Config(), widgetGVK, "t")
	for _, term := range []int{2, 3} {
		if err := stampWidget(ctx, env.Config(), "a", term); err != nil {
			t.Fatal(err)
		}
	}
	batontest.WaitFor(t, 30*time.Second, "the three stamps seen", func() bool { return m.Seen() == 3 })
	if err := m.Err(); err != nil {
		t.Fatalf("stamps 1, 2, 3: %v", err)
	}
	if err := stampWidget(ctx, env.Config(), "a", 2); err != nil {
		t.Fatal(err)
	}
	batontest.WaitFor(t, 30*time.Second, "the step back reported", func() bool { return m.Err() != nil })
	if err := m.Err(); !strings.Contains(err.Error(), "default/a: term stamp went back from 3 to 2") {
		t.Fatalf("monitor error %v, want the step back from 3 to 2", err)
	}

	// A kind the API server does not serve fails the test at once.
	msg := fatalOf(t, func(tb testing.TB) {
		batontest.WatchStampsOf(tb, env.Config(), schema.GroupVersionKind{Group: "test.baton.dev", Version: "v1", Kind: "Gadget"}, "t")
	})
	if !strings.Contains(msg, "does not serve test.baton.dev/v1, Kind=Gadget") {
		t.Fatalf("WatchStampsOf of an unserved kind failed with %q", msg)
	}
}

func TestWithCRDsRefusesAMissingPath(t *testing.T) {
	_, err := batontest.NewEnv(batontest.WithCRDs(filepath.Join("testdata", "no-such-dir")))
	if !errors.Is(err, batontest.ErrCRDPath) || !strings.Contains(err.Error(), "no-such-dir") {
		t.Fatalf("NewEnv with a missing CRD path = %v, want ErrCRDPath naming the path", err)
	}
}

// recordingTB records the errors reported to it instead of failing the test;
// everything else goes to the test.
type recordingTB struct {
	testing.TB

	mu   sync.Mutex
	errs []string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Error(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprint(args...))
}

// fatalOf runs f with a testing.TB whose Fatalf ends f's goroutine, and returns the
// message f failed with ("" if it did not).
func fatalOf(t *testing.T, f func(testing.TB)) string {
	t.Helper()
	ft := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ft)
	}()
	<-done
	return ft.msg
}

type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
