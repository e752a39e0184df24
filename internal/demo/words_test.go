package demo

import "testing"

// TestCountSaysOneInTheSingular: "1 server", never "1 servers".
func TestCountSaysOneInTheSingular(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "0 servers"}, {1, "1 server"}, {2, "2 servers"}} {
		if got := count(tc.n, "server"); got != tc.want {
			t.Errorf("count(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	out := "global\n  maxconn 2000\nbackend web\n  server web.haproxy-1 10.0.0.2:8080 check\n"
	if got, want := renderSummary(out), "maxconn 2000; 1 server: haproxy-1 10.0.0.2:8080"; got != want {
		t.Errorf("renderSummary = %q, want %q", got, want)
	}
}
