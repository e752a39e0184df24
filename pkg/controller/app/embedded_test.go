package app_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/baton-dev/baton/pkg/controller/app"
	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/configchange"
)

func TestPodSetRefusesBadPods(t *testing.T) {
	s, err := app.NewPodSet(pods(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pods  []config.Pod
		field string
	}{
		{[]config.Pod{{Name: "a"}}, "pods[0].namespace"},
		{[]config.Pod{{Namespace: "n", Name: "a"}, {Namespace: "n"}}, "pods[1].name"},
		{[]config.Pod{{Namespace: "n", Name: "a", IP: "10.0.0"}}, "pods[0].ip"},
		{[]config.Pod{{Namespace: "n", Name: "a"}, {Namespace: "n", Name: "a"}}, "pods[1]: duplicate pod n/a (also pods[0])"},
	} {
		err := s.Set(tc.pods)
		if !errors.Is(err, app.ErrInvalidPod) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Set(%v) = %v, want ErrInvalidPod naming %s", tc.pods, err, tc.field)
		}
	}
	if got := s.Get(); len(got) != 2 || got[1].Name != "haproxy-1" {
		t.Errorf("a refused Set changed the set: %v", got)
	}
	if _, err := app.NewPodSet([]config.Pod{{}}); !errors.Is(err, app.ErrInvalidPod) {
		t.Errorf("NewPodSet with a bad pod: %v", err)
	}
	if _, err := app.NewEmbedded(app.EmbeddedOptions{Pods: []config.Pod{{}}}); !errors.Is(err, app.ErrInvalidOptions) || !strings.Contains(err.Error(), "pods") {
		t.Errorf("NewEmbedded with a bad pod: %v", err)
	}
}

func TestPodSetSorts(t *testing.T) {
	s, err := app.NewPodSet([]config.Pod{{Namespace: "b", Name: "x"}, {Namespace: "a", Name: "z"}, {Namespace: "a", Name: "y"}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range s.Get() {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	if got := strings.Join(names, ","); got != "a/y,a/z,b/x" {
		t.Errorf("Get = %s", got)
	}
}

// TestDocumentSource: the source delivers the document at once, then the
// newest after Sets, coalescing those made while the reader was busy.
func TestDocumentSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := app.NewDocument("cfg", []byte("one"))
		src := d.Source()
		if src.String() != "memory:cfg" {
			t.Errorf("String = %q", src.String())
		}
		got := make(chan string)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- src.Run(ctx, func(doc configchange.Document) { got <- string(doc.Raw) }) }()
		if s := <-got; s != "one" {
			t.Errorf("first = %q", s)
		}
		d.Set([]byte("two"))
		synctest.Wait() // the source is busy handing "two" over
		d.Set([]byte("three"))
		d.Set([]byte("four"))
		if s := <-got; s != "two" {
			t.Errorf("second = %q", s)
		}
		if s := <-got; s != "four" {
			t.Errorf("after two Sets while busy = %q, want the newest", s)
		}
		synctest.Wait()
		select {
		case s := <-got:
			t.Errorf("unexpected delivery %q", s)
		default:
		}
		if string(d.Get()) != "four" {
			t.Errorf("Get = %q", d.Get())
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}
