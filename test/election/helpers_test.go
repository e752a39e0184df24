package election

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// mtime is a CLOCK_MONOTONIC reading in nanoseconds: one clock for every process
// of the host, so the stamps of subprocesses and of the test process compare.
type mtime int64

func now() mtime {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("clock_gettime: %v", err))
	}
	return mtime(ts.Nano())
}

func (a mtime) sub(b mtime) time.Duration { return time.Duration(a - b) }

func (a mtime) add(d time.Duration) mtime { return a + mtime(d) }

// timings are an elector's LeaseDuration, RenewDeadline and RetryPeriod.
type timings struct {
	lease, renew, retry time.Duration
}

// fast are the short timings of the tests: a test sees a whole failover in a few
// seconds. RenewDeadline > 1.2 × RetryPeriod, and LeaseDuration - RenewDeadline = 1s
// of margin, as the default 15s/10s/2s have 5s.
var fast = timings{lease: 3 * time.Second, renew: 2 * time.Second, retry: 400 * time.Millisecond}

func (tm timings) String() string { return fmt.Sprintf("%v/%v/%v", tm.lease, tm.renew, tm.retry) }

// waitFor polls cond every 2ms until it holds or timeout passes, then fails t.
// Against a real API server there is no fake clock; the polling only watches
// state that the electors change on their own.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// poll reports whether cond held within timeout.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testLogger returns a debug logger into a buffer that is printed when t fails.
func testLogger(t testing.TB, name string) *slog.Logger {
	buf := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of %s:\n%s", name, buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// leaseWrite is one successful write of a lease seen by a candidate's client.
type leaseWrite struct {
	Method string `json:"method"`
	Code   int    `json:"code"`
	Sent   mtime  `json:"sent"` // when the request entered the transport
	Done   mtime  `json:"t"`    // when the answer came back
}

// requestLog counts every request of one client and keeps its successful lease writes.
type requestLog struct {
	requests atomic.Int64
	// onWrite, when set, is called for each successful lease write, outside mu.
	onWrite func(leaseWrite)

	// mu guards writes.
	mu     sync.Mutex
	writes []leaseWrite
}

// wrap is a rest.Config WrapTransport that feeds l.
func (l *requestLog) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		l.requests.Add(1)
		write := r.Method != http.MethodGet && strings.Contains(r.URL.Path, "/leases")
		sent := now()
		resp, err := next.RoundTrip(r)
		if write && err == nil && resp.StatusCode/100 == 2 {
			w := leaseWrite{Method: r.Method, Code: resp.StatusCode, Sent: sent, Done: now()}
			l.mu.Lock()
			l.writes = append(l.writes, w)
			l.mu.Unlock()
			if l.onWrite != nil {
				l.onWrite(w)
			}
		}
		return resp, err
	})
}

// lastWrite returns the last successful lease write.
func (l *requestLog) lastWrite() (leaseWrite, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.writes) == 0 {
		return leaseWrite{}, false
	}
	return l.writes[len(l.writes)-1], true
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// loggedClientset returns a clientset of its own for cfg whose requests go to log.
func loggedClientset(t testing.TB, cfg *rest.Config, log *requestLog) kubernetes.Interface {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	if prev := cfg.WrapTransport; prev != nil { // e.g. a gate: the log sees what passes it
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return log.wrap(prev(rt)) }
	} else {
		cfg.WrapTransport = log.wrap
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return cs
}

// median returns the median of ds (the mean of the middle two for an even count).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func maxOf(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds)
}
