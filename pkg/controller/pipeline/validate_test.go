package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/pipeline"
)

// valid is a correct configuration; cases below edit it.
const valid = `global
    maxconn 100
defaults
    mode http
    timeout connect 5s
frontend web
    bind :80
    use_backend api if { path_beg /api }
    default_backend app
backend app
    balance roundrobin
    server a 10.0.0.1:8080 check
backend api
    server b host-1.example:9090
`

func TestValidatorAcceptsValid(t *testing.T) {
	errs, err := pipeline.HAProxyValidator{}.Validate(context.Background(), valid)
	if err != nil || errs != nil {
		t.Fatalf("Validate(valid) = %v, %v", errs, err)
	}
}

func TestValidatorFindings(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"unknown default_backend", strings.Replace(valid, "default_backend app", "default_backend x", 1),
			[]string{`line 9: default_backend "x": no such backend`}},
		{"unknown use_backend", strings.Replace(valid, "use_backend api", "use_backend apl", 1),
			[]string{`line 8: use_backend "apl": no such backend`}},
		{"empty backend", strings.Replace(valid, "    server b host-1.example:9090\n", "", 1),
			[]string{`line 13: backend "api" has no servers`}},
		{"duplicate backend", valid + "backend app\n    server c 10.0.0.3:1\n",
			[]string{`line 15: duplicate backend "app" (first on line 10)`}},
		{"duplicate frontend", valid + "frontend web\n    bind :81\n",
			[]string{`line 15: duplicate frontend "web" (first on line 6)`}},
		{"duplicate server", strings.Replace(valid, "    server b ", "    server a 10.0.0.9:1\n    server b ", 1),
			[]string{}}, // different backends: allowed
		{"duplicate server in one backend", strings.Replace(valid, "    server a 10.0.0.1:8080 check\n", "    server a 10.0.0.1:8080 check\n    server a 10.0.0.2:8080\n", 1),
			[]string{`line 13: duplicate server "a" in backend "app" (first on line 12)`}},
		{"server without address", strings.Replace(valid, "server a 10.0.0.1:8080 check", "server a", 1),
			[]string{`line 12: server "a": missing address:port`}},
		{"server without port", strings.Replace(valid, "10.0.0.1:8080", "10.0.0.1", 1),
			[]string{`line 12: server "a": address "10.0.0.1": missing port`}},
		{"server without host", strings.Replace(valid, "10.0.0.1:8080", ":8080", 1),
			[]string{`line 12: server "a": address ":8080": missing host`}},
		{"server port out of range", strings.Replace(valid, "10.0.0.1:8080", "10.0.0.1:0", 1),
			[]string{`line 12: server "a": address "10.0.0.1:0": port 0 out of range 1-65535`}},
		{"server bad host", strings.Replace(valid, "host-1.example", "-bad_host", 1),
			[]string{`line 14: server "b": address "-bad_host:9090": host is neither an IP nor a hostname`}},
		{"bind without port", strings.Replace(valid, "bind :80", "bind 0.0.0.0", 1),
			[]string{`line 7: bind "0.0.0.0": missing port`}},
		{"bind bad port", strings.Replace(valid, "bind :80", "bind :http", 1),
			[]string{`line 7: bind ":http": port "http" is not a number`}},
		{"bind empty", strings.Replace(valid, "bind :80", "bind", 1),
			[]string{`line 7: bind: missing address:port`}},
		{"frontend without bind", strings.Replace(valid, "    bind :80\n", "", 1),
			[]string{`line 6: frontend "web" has no bind`}},
		{"unknown directive", strings.Replace(valid, "    balance roundrobin", "    balanse roundrobin", 1),
			[]string{`line 11: unknown directive "balanse" in backend section`}},
		{"directive of another section", strings.Replace(valid, "    balance roundrobin", "    bind :1", 1),
			[]string{`line 11: unknown directive "bind" in backend section`}},
		{"directive outside sections", "maxconn 1\n" + valid,
			[]string{`line 1: directive "maxconn" outside any section`}},
		{"bad maxconn", strings.Replace(valid, "maxconn 100", "maxconn lots", 1),
			[]string{`line 2: maxconn "lots": not a positive integer`}},
		{"bad mode", strings.Replace(valid, "mode http", "mode udp", 1),
			[]string{`line 4: mode "udp": must be one of http, tcp`}},
		{"bad balance", strings.Replace(valid, "balance roundrobin", "balance random-ish", 1),
			[]string{`line 11: balance "random-ish": must be one of roundrobin, static-rr, leastconn, first, source, uri`}},
		{"bad timeout", strings.Replace(valid, "timeout connect 5s", "timeout connect soon", 1),
			[]string{`line 5: timeout connect "soon": not a duration`}},
		{"bad use_backend condition", strings.Replace(valid, "use_backend api if { path_beg /api }", "use_backend api when x", 1),
			[]string{`line 8: use_backend "api": want "if|unless CONDITION" after the name`}},
		{"backend without name", strings.Replace(valid, "\nbackend api", "\nbackend", 1),
			[]string{`line 8: use_backend "api": no such backend`, `line 13: backend without a name`}},
		{"invalid section name", strings.Replace(strings.Replace(valid, "\nbackend app", "\nbackend a/b", 1), "default_backend app", "default_backend a/b", 1),
			[]string{`line 10: backend "a/b": invalid name (letters, digits, '-', '_', '.', ':')`}},
		{"comments and blank lines are ignored", "# header\n\n" + strings.Replace(valid, "check", "check # health", 1), []string{}},
		{"several, in line order", strings.Replace(strings.Replace(valid, "default_backend app", "default_backend nope", 1), "bind :80", "bind :99999", 1),
			[]string{`line 7: bind ":99999": port 99999 out of range 1-65535`, `line 9: default_backend "nope": no such backend`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs, err := pipeline.HAProxyValidator{}.Validate(context.Background(), tt.text)
			if err != nil {
				t.Fatalf("validator failed: %v", err)
			}
			if got := errStrings(errs); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("findings:\n%s\nwant:\n%s\ntext:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"), numbered(tt.text))
			}
			for _, e := range errs {
				var le pipeline.LineError
				if !errors.As(e, &le) || le.Line < 1 {
					t.Errorf("finding %v is not a LineError with a line", e)
				}
			}
		})
	}
}

// TestRenderedConfigErrors feeds configurations the renderer renders
// faithfully but wrongly, and checks that the validator catches them.
func TestRenderedConfigErrors(t *testing.T) {
	ready := []config.Pod{{Namespace: "ns", Name: "p", IP: "10.0.0.1", Ready: true}}
	tests := []struct {
		name string
		edit func(*config.Config)
		pods []config.Pod
		want []string
	}{
		{"frontend to a missing backend", func(c *config.Config) { c.Frontends[0].DefaultBackend = "gone" }, ready,
			[]string{`line 15: default_backend "gone": no such backend`}},
		{"bind without port", func(c *config.Config) { c.Frontends[0].Bind = "127.0.0.1" }, ready,
			[]string{`line 14: bind "127.0.0.1": missing port`}},
		{"pod without IP", nil, []config.Pod{{Namespace: "ns", Name: "p", Ready: true}},
			[]string{`line 23: server "ns.p": address ":8080": missing host`, `line 27: server "ns.p": address ":9090": missing host`}},
		{"backend port out of range", func(c *config.Config) { c.Backends[0].Port = 70000 }, ready,
			[]string{`line 23: server "ns.p": address "10.0.0.1:70000": port 70000 out of range 1-65535`}},
		{"duplicate backend names", func(c *config.Config) { c.Backends[1].Name = "app" }, ready,
			[]string{`line 19: default_backend "api": no such backend`, `line 25: duplicate backend "app" (first on line 21)`}},
		{"duplicate pods", nil, []config.Pod{ready[0], ready[0]},
			[]string{`line 24: duplicate server "ns.p" in backend "app" (first on line 23)`, `line 29: duplicate server "ns.p" in backend "api" (first on line 28)`}},
		{"unknown balance", func(c *config.Config) { c.Backends[0].Balance = "fastest" }, ready,
			[]string{`line 22: balance "fastest": must be one of roundrobin, static-rr, leastconn, first, source, uri`}},
		{"name with a space", func(c *config.Config) { c.Frontends[1].Name = "my api" }, ready,
			[]string{`line 17: frontend "my": unexpected arguments "api"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			if tt.edit != nil {
				tt.edit(cfg)
			}
			res, err := pipeline.NewDefault().Execute(context.Background(), pipeline.Input{Config: cfg, Pods: tt.pods})
			if err != nil {
				t.Fatal(err)
			}
			if got := errStrings(res.Errors); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("findings:\n%s\nwant:\n%s\noutput:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"), numbered(res.Output))
			}
		})
	}
}

// TestValidatorRangesAndSpelling: counts within what HAProxy reads, ports
// and counts in plain decimal, and findings that quote a bounded prefix of
// a long word.
func TestValidatorRangesAndSpelling(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"maxconn at its limit", strings.Replace(valid, "maxconn 100", "maxconn 1000000000", 1), nil},
		{"maxconn above HAProxy's int", strings.Replace(valid, "maxconn 100", "maxconn 9223372036854775807", 1),
			[]string{`line 2: maxconn 9223372036854775807: above 1000000000`}},
		{"maxconn with a sign", strings.Replace(valid, "maxconn 100", "maxconn +100", 1),
			[]string{`line 2: maxconn "+100": not in plain decimal (100)`}},
		{"retries with leading zeros", strings.Replace(valid, "timeout connect 5s", "timeout connect 5s\n    retries 03", 1),
			[]string{`line 6: retries "03": not in plain decimal (3)`}},
		{"bind port with a sign", strings.Replace(valid, "bind :80", "bind :+80", 1),
			[]string{`line 7: bind ":+80": port "+80": not in plain decimal (80)`}},
		{"server port with leading zeros", strings.Replace(valid, "10.0.0.1:8080", "10.0.0.1:0008080", 1),
			[]string{`line 12: server "a": address "10.0.0.1:0008080": port "0008080": not in plain decimal (8080)`}},
		{"long word", strings.Replace(valid, "default_backend app", "default_backend "+long, 1),
			[]string{`line 9: default_backend "` + long[:64] + `"… (1048576 bytes): no such backend`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs, err := pipeline.HAProxyValidator{}.Validate(context.Background(), tt.text)
			if err != nil {
				t.Fatalf("validator failed: %v", err)
			}
			if got := errStrings(errs); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("findings:\n%.2000s\nwant:\n%.2000s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
