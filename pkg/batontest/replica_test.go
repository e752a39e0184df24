package batontest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/baton-dev/baton/pkg/batontest"
)

// TestReplicasRunAndStop: each replica has its own name and switch, runs until
// Stop, and Stop reports a run that returned an error.
func TestReplicasRunAndStop(t *testing.T) {
	rs := batontest.NewReplicas(t, 3, &rest.Config{Host: "https://127.0.0.1:1"})
	if rs[0].Name != "r0" || rs[2].Name != "r2" || rs[0].Switch == rs[1].Switch {
		t.Fatalf("replicas %q %q: want names r0..r2 and a switch each", rs[0].Name, rs[2].Name)
	}
	started := make(chan struct{})
	rs[0].Run(t, func(ctx context.Context) error { close(started); <-ctx.Done(); return nil })
	<-started
	if !rs[0].Running() || rs[1].Running() {
		t.Fatalf("running: r0 %v r1 %v", rs[0].Running(), rs[1].Running())
	}
	rs[0].Stop(t)
	if rs[0].Running() {
		t.Fatal("r0 runs after Stop")
	}
	if exited, err := rs[0].Exited(); !exited || err != nil {
		t.Fatalf("r0 exited %v with %v", exited, err)
	}

	// A run that fails on its own is seen, and Stop reports it.
	boom := errors.New("boom")
	rs[1].Run(t, func(context.Context) error { return boom })
	batontest.WaitFor(t, 10*time.Second, "r1's run to return", func() bool { exited, _ := rs[1].Exited(); return exited })
	var rec recorder
	rs[1].Stop(&rec)
	if !rec.failed {
		t.Fatal("Stop did not report the run's error")
	}
}

// recorder is a testing.TB that records a failure instead of failing.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
