package main

import (
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestRunServesMetricsOnLocalhostByDefault: /metrics (unauthenticated)
// listens on loopback unless told otherwise, and the kubelet's probe
// address is off until a pod's manifest sets it.
func TestRunServesMetricsOnLocalhostByDefault(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var rf runFlags
	rf.register(fs)
	host, _, err := net.SplitHostPort(rf.metrics)
	if err != nil {
		t.Fatalf("--metrics-addr default %q: %v", rf.metrics, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		t.Errorf("--metrics-addr default %q does not listen on loopback only", rf.metrics)
	}
	if rf.probes != "" {
		t.Errorf("--probe-addr default %q, want off", rf.probes)
	}
}

func TestRunChecksServeAddresses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--probe-addr=nocolon"}, `baton run: --probe-addr "nocolon"`},
		{[]string{"--metrics-addr=nocolon"}, `baton run: --metrics-addr "nocolon"`},
		{[]string{"--metrics-addr=:8080", "--probe-addr=:8080"}, `baton run: --probe-addr ":8080" is also --metrics-addr`},
	} {
		code, _, stderr := runCmd(t, append([]string{"run", "--identity=a"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("baton run %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, stderr, exitUsage, tc.want)
		}
	}
}

// TestProbeHandler: the probe address answers the kubelet with the status
// and one word, never the reasons (which may quote the configuration), and
// serves nothing else.
func TestProbeHandler(t *testing.T) {
	secret := errors.New("not ready: no valid configuration yet: frontends[0].bind: \"10.1.2.3:80\" ...")
	// The handler runs on the server's goroutines.
	var mu sync.Mutex
	var healthy, ready error
	check := func(e *error) func() error {
		return func() error { mu.Lock(); defer mu.Unlock(); return *e }
	}
	srv := httptest.NewServer(probeHandler(check(&healthy), check(&ready)))
	defer srv.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, tc := range []struct {
		path           string
		healthy, ready error
		code           int
		body           string
	}{
		{"/healthz", nil, secret, http.StatusOK, "ok\n"},
		{"/readyz", nil, nil, http.StatusOK, "ok\n"},
		{"/readyz", nil, secret, http.StatusServiceUnavailable, "unready\n"},
		{"/healthz", secret, nil, http.StatusServiceUnavailable, "unhealthy\n"},
		{"/metrics", nil, nil, http.StatusNotFound, ""},
	} {
		mu.Lock()
		healthy, ready = tc.healthy, tc.ready
		mu.Unlock()
		code, body := get(tc.path)
		if code != tc.code || (tc.body != "" && body != tc.body) {
			t.Errorf("GET %s (healthy %v, ready %v) = %d %q, want %d %q", tc.path, tc.healthy, tc.ready, code, body, tc.code, tc.body)
		}
	}
}

// TestRunFlagNames: baton run takes the flag names of kubebuilder and
// component-base, and keeps its old names as aliases of the same values.
func TestRunFlagNames(t *testing.T) {
	for _, name := range []string{"leader-elect", "leader-elect-lease-duration", "leader-elect-renew-deadline",
		"leader-elect-retry-period", "leader-elect-resource-name", "leader-elect-resource-namespace",
		"metrics-bind-address", "health-probe-bind-address"} {
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		var rf runFlags
		rf.register(fs)
		if fs.Lookup(name) == nil {
			t.Errorf("no --%s", name)
		}
	}
	for old, name := range aliasOf {
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		var rf runFlags
		rf.register(fs)
		value := map[string]string{"lease-duration": "20s", "renew-deadline": "5s", "retry-period": "1s"}[old]
		if value == "" {
			value = "x-" + old
		}
		if err := fs.Parse([]string{"--" + old + "=" + value}); err != nil {
			t.Fatal(err)
		}
		if got := fs.Lookup(name).Value.String(); got != value {
			t.Errorf("--%s=%s: --%s is %q", old, value, name, got)
		}
	}
}
