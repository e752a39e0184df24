package app_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/controller/app"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// get serves one request to h and returns the status and body.
func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

// TestReadyz: not ready before Run, nor while the only configuration is
// invalid (the reason is named); ready once a valid one and the pods are in.
func TestReadyz(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		w.Config.Set([]byte("backends:\n  - name: web\n    port: 70000\n"))
		n := startNode(t, w, "a", nil)
		h := n.r.Handler()
		eventually(t, "the invalid configuration to be read", n.r.ConfigHandler().Synced)
		code, body := get(t, h, "/readyz")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "no valid configuration yet") || !strings.Contains(body, "backends[0].port") {
			t.Errorf("/readyz with an invalid configuration: %d %q", code, body)
		}
		if err := n.r.Ready(); !errors.Is(err, app.ErrNotReady) {
			t.Errorf("Ready = %v, want ErrNotReady", err)
		}
		w.Config.Set(configDoc(2100))
		eventually(t, "readiness", func() bool { return n.r.Ready() == nil })
		if code, body := get(t, h, "/readyz"); code != http.StatusOK || body != "ok\n" {
			t.Errorf("/readyz once synced: %d %q", code, body)
		}
		if code, _ := get(t, h, "/healthz"); code != http.StatusOK {
			t.Errorf("/healthz: %d", code)
		}
	})
}

func TestReadyzBeforeRun(t *testing.T) {
	w := newWorld(t)
	r, err := app.New(w.Options("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	code, body := get(t, r.Handler(), "/readyz")
	if code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before Run: %d", code)
	}
	for _, want := range []string{"runtime not running", "configuration not read yet", "pods not discovered yet"} {
		if !strings.Contains(body, want) {
			t.Errorf("/readyz before Run lacks %q: %q", want, body)
		}
	}
}

// failing is an all-replica component that fails at once.
type failing struct{}

func (failing) Name() string                { return "failing" }
func (failing) Start(context.Context) error { return errors.New("broken on purpose") }

func TestHealthzFailsOnFailedComponent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		n := startNode(t, w, "a", func(o *app.Options) {
			o.AllReplica = func(*app.Replica) ([]lifecycle.Component, error) { return []lifecycle.Component{failing{}}, nil }
		})
		eventually(t, "the failure", func() bool { return n.r.Healthy() != nil })
		code, body := get(t, n.r.Handler(), "/healthz")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "failing") || !strings.Contains(body, "broken on purpose") {
			t.Errorf("/healthz: %d %q", code, body)
		}
		if !errors.Is(n.r.Healthy(), lifecycle.ErrComponentFailed) {
			t.Errorf("Healthy = %v", n.r.Healthy())
		}
		_, metrics := get(t, n.r.Handler(), "/metrics")
		if !strings.Contains(metrics, `baton_component_failures_total{component="failing"} 1`) {
			t.Errorf("/metrics lacks the failure:\n%s", metrics)
		}
	})
}

// stuck is a lease store whose writes hang, ignoring their context, once
// hang is closed, as when the elector's requests never come back.
type stuck struct {
	k8sle.LeaseStore
	hang    chan struct{}
	release chan struct{}
}

func (s *stuck) Update(ctx context.Context, r k8sle.LeaseRecord) (k8sle.LeaseRecord, error) {
	select {
	case <-s.hang:
		<-s.release
		return k8sle.LeaseRecord{}, ctx.Err()
	default:
	}
	return s.LeaseStore.Update(ctx, r)
}

// TestHealthzFailsOnMissedRenewDeadline: a leader whose renews hang is
// unhealthy once its renew deadline passed, while it still holds the term.
func TestHealthzFailsOnMissedRenewDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		s := &stuck{hang: make(chan struct{}), release: make(chan struct{})}
		n := startNode(t, w, "a", func(o *app.Options) {
			s.LeaseStore = o.LeaseStore
			o.LeaseStore = s
		})
		leaderOf(t, n)
		if code, _ := get(t, n.r.Handler(), "/healthz"); code != http.StatusOK {
			t.Fatalf("/healthz while leading: %d", code)
		}
		close(s.hang)
		time.Sleep(renew + retry)
		code, body := get(t, n.r.Handler(), "/healthz")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "renew deadline missed") {
			t.Errorf("/healthz with a stuck renew: %d %q", code, body)
		}
		if !errors.Is(n.r.Healthy(), k8sle.ErrRenewDeadlineMissed) {
			t.Errorf("Healthy = %v", n.r.Healthy())
		}
		// The term's leader-only side stopped by the elector's clock,
		// before any event could tell the runtime.
		if st := n.r.Publisher().State(); st.Running {
			t.Error("publisher still running past the renew deadline")
		}
		close(s.release)
		eventually(t, "health after the stuck write returned", func() bool { return n.r.Healthy() == nil })
	})
}

// TestMetricsEndpoint reads /metrics of a replica that took over from
// another: its replays (deterministic, since its caches were full when it
// was elected), its term, its takeover.
func TestMetricsEndpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		a := startNode(t, w, "a", nil)
		leaderOf(t, a)
		b := startNode(t, w, "b", nil)
		synced(t, configDoc(2000), pods(1, 2), a, b)
		a.stop(t)
		l := leaderOf(t, b)
		term := l.r.Manager().Status().Term
		// The term-ready hook records its latency just after Status reports the term
		// ready: let every goroutine of the bubble settle before reading.
		synctest.Wait()
		_, body := get(t, b.r.Handler(), "/metrics")
		for _, want := range []string{
			"baton_is_leader 1\n",
			"baton_term " + strconv.FormatUint(term, 10) + "\n",
			`baton_leadership_transitions_total{transition="acquired"} 1`,
			`baton_replays_total{type="config.validated"} 1`,
			`baton_replays_total{type="pods.discovered"} 1`,
			`baton_bus_delivered_total{subscriber="config-publisher",type="config.validated"} 1`,
			"baton_term_ready_seconds_count 1\n",
			"baton_handover_seconds_count 1\n",
			"baton_term_ready 1\n",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q:\n%s", want, grep(body, "baton_replays|baton_leadership|baton_term|baton_handover"))
			}
		}
	})
}

func TestNewNamesBadOptions(t *testing.T) {
	_, err := app.New(app.Options{Election: k8sle.Config{}, StopTimeout: -1, BusCapacity: -1})
	if !errors.Is(err, app.ErrInvalidOptions) {
		t.Fatalf("New = %v, want ErrInvalidOptions", err)
	}
	for _, field := range []string{"election.identity", "leaseStore", "configSource", "discovery", "published", "stopTimeout", "busCapacity"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
	w := newWorld(t)
	opts := w.Options("a")
	opts.Election.LeaseDuration = time.Second
	opts.Election.RenewDeadline = 2 * time.Second
	if _, err := app.New(opts); !errors.Is(err, k8sle.ErrInvalidConfig) || !strings.Contains(err.Error(), "lease duration") {
		t.Errorf("New with renew deadline above the lease: %v", err)
	}
}

func TestClusterNamesBadConfig(t *testing.T) {
	_, err := app.Cluster(app.ClusterConfig{})
	if !errors.Is(err, app.ErrInvalidOptions) {
		t.Fatalf("Cluster = %v", err)
	}
	for _, field := range []string{"clientset", "identity", "namespace", "podSelector"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
}

func grep(body, prefixes string) string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		for _, p := range strings.Split(prefixes, "|") {
			if strings.HasPrefix(line, p) {
				out = append(out, line)
			}
		}
	}
	return strings.Join(out, "\n")
}
