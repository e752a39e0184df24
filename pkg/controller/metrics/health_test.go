package metrics_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	"github.com/baton-dev/baton/pkg/controller/metrics"
)

// healthyElection is an election source that also reports its health.
type healthyElection struct {
	fakeElection
	err error
}

func (h *healthyElection) Healthy() error { return h.err }

var errMissed = errors.New("renew deadline missed")

func TestSourcesHealthy(t *testing.T) {
	failed := &fakeRuntime{st: lifecycle.Status{Running: true, Components: []lifecycle.ComponentStatus{
		{Name: "discovery", State: lifecycle.StateFailed, LastError: errors.New("boom")},
	}}}
	for _, tc := range []struct {
		name string
		src  metrics.Sources
		want []error // each must be in the error; none means healthy
	}{
		{"no sources", metrics.Sources{}, nil},
		{"all well", metrics.Sources{Election: &healthyElection{}, Runtime: &fakeRuntime{st: lifecycle.Status{Running: true}}}, nil},
		{"election without Healthy", metrics.Sources{Election: &fakeElection{}}, nil},
		{"elector unhealthy", metrics.Sources{Election: &healthyElection{err: errMissed}}, []error{errMissed}},
		{"component failed", metrics.Sources{Runtime: failed}, []error{lifecycle.ErrComponentFailed}},
		{"both", metrics.Sources{Election: &healthyElection{err: errMissed}, Runtime: failed}, []error{errMissed, lifecycle.ErrComponentFailed}},
	} {
		err := tc.src.Healthy()
		if (err == nil) != (len(tc.want) == 0) {
			t.Errorf("%s: Healthy = %v", tc.name, err)
		}
		for _, w := range tc.want {
			if !errors.Is(err, w) {
				t.Errorf("%s: Healthy = %v, want it to wrap %v", tc.name, err, w)
			}
		}
	}
}

func TestCheckHandler(t *testing.T) {
	var fail error
	srv := httptest.NewServer(metrics.CheckHandler(func() error { return fail }))
	defer srv.Close()
	get := func() (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("Cache-Control %q", resp.Header.Get("Cache-Control"))
		}
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != http.StatusOK || body != "ok\n" {
		t.Errorf("healthy: %d %q", code, body)
	}
	fail = errors.Join(errors.New("a"), errors.New("b"))
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "a\nb") {
		t.Errorf("unhealthy: %d %q", code, body)
	}
}
