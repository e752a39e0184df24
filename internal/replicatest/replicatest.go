package replicatest

import (
	"net/http"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/batontest"
)

// ErrPartitioned is batontest.ErrCut.
var ErrPartitioned = batontest.ErrCut

// Partition is a batontest.Switch used only to cut; the zero Partition is connected.
type Partition struct{ batontest.Switch }

// Monitor is batontest.StampMonitor.
type Monitor = batontest.StampMonitor

// Watch is batontest.WatchStamps.
func Watch(t testing.TB, cs kubernetes.Interface, annotation string) *Monitor {
	t.Helper()
	return batontest.WatchStamps(t, cs, annotation)
}

// WaitFor is batontest.WaitFor.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	batontest.WaitFor(t, timeout, what, cond)
}

// RoundTripFunc is a function that is an http.RoundTripper, for wrapping a client's
// transport (rest.Config.Wrap).
type RoundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
