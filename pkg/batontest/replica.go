package batontest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// StopTimeout is how long Replica.Stop waits for a replica's run to return.
const StopTimeout = 30 * time.Second

// Replica is one replica of the controller under test, run by the test process in
// a goroutine of its own: a name, a Switch between it and the API server, and the
// function that runs it. Build the controller from Name and Config (or give only the
// clients that should be cut off a config through Switch), then Run it.
type Replica struct {
	// Name is the replica's identity: "r0", "r1", ...
	Name string
	// Switch cuts the replica off, or holds its requests in flight. Only clients
	// built from Config (or Switch.Wrap) go through it.
	Switch *Switch

	config *rest.Config

	// mu guards the fields below.
	mu      sync.Mutex
	state   replicaState
	cancel  context.CancelFunc
	done    chan struct{} // closed when the run returned
	runErr  error
	stopped bool // Stop was called
}

// replicaState is where a replica's run stands.
type replicaState int

const (
	replicaBuilt   replicaState = iota // Run not called yet
	replicaRunning                     // its run has not returned
	replicaExited                      // its run returned
)

// NewReplicas returns n replicas named r0 to r<n-1>, each with its own Switch in
// front of the API server that cfg reaches. The end of t stops each one running.
func NewReplicas(t testing.TB, n int, cfg *rest.Config) []*Replica {
	t.Helper()
	rs := make([]*Replica, n)
	for i := range rs {
		r := &Replica{Name: fmt.Sprintf("r%d", i), Switch: &Switch{}}
		r.config = r.Switch.Wrap(cfg)
		rs[i] = r
	}
	t.Cleanup(func() {
		for _, r := range rs {
			r.Switch.Heal() // a held request would hold its run up
			r.Stop(t)
		}
	})
	return rs
}

// Config returns a copy of the API server's config whose requests go through the
// replica's Switch.
func (r *Replica) Config() *rest.Config { return rest.CopyConfig(r.config) }

// Run runs run in a goroutine of its own until Stop (or the end of the test)
// cancels its context. It fails t if the replica runs already.
func (r *Replica) Run(t testing.TB, run func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r.mu.Lock()
	if r.state != replicaBuilt {
		r.mu.Unlock()
		cancel()
		t.Fatalf("batontest: %s: Run called twice", r.Name)
		return
	}
	done := make(chan struct{})
	r.state, r.cancel, r.done = replicaRunning, cancel, done
	r.mu.Unlock()
	go func() {
		err := run(ctx)
		r.mu.Lock()
		r.state, r.runErr = replicaExited, err
		r.mu.Unlock()
		close(done)
	}()
}

// Running reports whether the replica's run was started, not stopped, and has not
// returned.
func (r *Replica) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state == replicaRunning && !r.stopped
}

// Exited reports whether the run returned, and with what.
func (r *Replica) Exited() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state == replicaExited, r.runErr
}

// Stop cancels the replica's context, as a SIGTERM would, waits up to StopTimeout
// for its run to return, and fails t if it did not or returned an error. Later
// calls, and calls on a replica never run, do nothing.
func (r *Replica) Stop(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	if r.state == replicaBuilt || r.stopped {
		r.mu.Unlock()
		return
	}
	r.stopped = true
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	cancel()
	select {
	case <-done:
	case <-time.After(StopTimeout):
		t.Errorf("batontest: %s did not stop within %v", r.Name, StopTimeout)
		return
	}
	if _, err := r.Exited(); err != nil {
		t.Errorf("batontest: %s: run returned %v", r.Name, err)
	}
}
