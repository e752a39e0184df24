package config_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-dev/baton/pkg/controller/config"
)

// FuzzLoad checks Load's contract on any document: it never panics; a
// refused document yields a nil config, an empty version and an error that
// matches ErrInvalid with at least one non-empty reason, and whose message
// and reasons are bounded whatever the document's size; an accepted one is
// valid, within every limit, with every bind in its canonical spelling and
// no two binds on one address, carries its own Version, survives a round
// trip through its canonical JSON form with the same version, and clones
// deeply.
//
// The seed corpus runs with every go test; explore with
//
//	go test -run '^$' -fuzz FuzzLoad -fuzztime 60s ./pkg/controller/config
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		config.DefaultYAML,
		`{"frontends":[{"name":"a","bind":":80","defaultBackend":"b"}],"backends":[{"name":"b","port":1}]}`,
		"frontends: []\nbackends: []\n",
		"frontends:\n  - name: x\n    bind: '*:65535'\n    defaultBackend: y\nbackends:\n  - name: y\n    port: 65535\n    balance: source\nmaxConn: 0\n",
		"frontends:\n  - name: x\n    bind: '[::1]:80'\n    defaultBackend: y\nbackends:\n  - {name: y, port: 80}\n",
		"maxConn: -1\n",
		"backends: {name: y}\n",
		"frontends:\n  - name: x\n  - name: x\n",
		"unknown: 1\n",
		"\x00",
		"",
		// Shapes of issue 21: numbers out of HAProxy's range, ports and
		// addresses in a second spelling, overlapping binds, long values.
		"frontends: [{name: a, bind: ':80', defaultBackend: b}]\nbackends: [{name: b, port: 80}]\nmaxConn: 9223372036854775807\n",
		"frontends: [{name: a, bind: ':80', defaultBackend: b}]\nbackends: [{name: b, port: 80}]\nmaxConn: 1000000000\n",
		"frontends: [{name: a, bind: ':+80', defaultBackend: b}]\nbackends: [{name: b, port: 80}]\n",
		"frontends: [{name: a, bind: ':0000080', defaultBackend: b}]\nbackends: [{name: b, port: 80}]\n",
		"frontends: [{name: a, bind: '[0:0::1]:80', defaultBackend: b}, {name: c, bind: '[::ffff:1.2.3.4]:81', defaultBackend: b}]\nbackends: [{name: b, port: 80}]\n",
		"frontends: [{name: a, bind: ':80', defaultBackend: b}, {name: c, bind: '[::]:80', defaultBackend: b}]\nbackends: [{name: b, port: 80}]\n",
		"frontends: [{name: a, bind: '0.0.0.0:80', defaultBackend: b}, {name: c, bind: '10.0.0.1:80', defaultBackend: b}, {name: d, bind: 'LB.example:80', defaultBackend: b}]\nbackends: [{name: b, port: 80}]\n",
		"frontends: [{name: a, bind: '[::1]:80', defaultBackend: b}, {name: c, bind: '127.0.0.1:80', defaultBackend: b}, {name: d, bind: 'lb.example:80', defaultBackend: b}]\nbackends: [{name: b, port: 80}]\n",
		"frontends: [{name: a, bind: ':80', defaultBackend: b}]\nbackends: [{name: b, port: 80, balance: " + strings.Repeat("r", 4096) + "}]\n",
		"frontends: [{name: a, bind: '" + strings.Repeat("h", 4096) + ":80', defaultBackend: " + strings.Repeat("b", 4096) + "}]\nbackends: [{name: b, port: 80}]\n",
		"frontends: [{name: a, bind: ':80', defaultBackend: b}]\nbackends: [{name: b, port: 0120}]\nmaxConn: 0x10\n",
		"frontends: [{name: a, bind: ':80', defaultBackend: b}]\nbackends: [{name: b, port: &p 8_0}, {name: c, port: *p}]\nmaxConn: +5\n",
		manyFrontends(config.MaxFrontends + 1),
		manyFrontends(config.MaxFrontends),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, version, err := config.Load(raw)
		if err != nil {
			if c != nil || version != "" {
				t.Fatalf("refused document returned config %v, version %q", c, version)
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("error does not match ErrInvalid: %v", err)
			}
			reasons := config.Reasons(err)
			if len(reasons) == 0 {
				t.Fatalf("error has no reasons: %v", err)
			}
			checkBounded(t, err)
			for i, r := range reasons {
				if r == "" {
					t.Fatalf("reason %d is empty: %v", i, err)
				}
			}
			return
		}
		if err := config.Validate(c); err != nil {
			t.Fatalf("accepted config does not validate: %v", err)
		}
		checkAccepted(t, c)
		if got := config.Version(c); got != version {
			t.Fatalf("Version(c) = %q, Load said %q", got, version)
		}
		canonical, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, againVersion, err := config.Load(canonical)
		if err != nil {
			t.Fatalf("canonical form %s does not load: %v", canonical, err)
		}
		if againVersion != version || !reflect.DeepEqual(again, c) {
			t.Fatalf("round trip changed the config: %q %+v, want %q %+v", againVersion, again, version, c)
		}
		clone := c.Clone()
		if !reflect.DeepEqual(clone, c) {
			t.Fatalf("clone %+v differs from %+v", clone, c)
		}
		clone.Frontends[0].Name += "-changed"
		clone.Backends[0].Port++
		if config.Version(c) != version {
			t.Fatal("changing the clone changed the original")
		}
	})
}

// manyFrontends returns a valid document but for the number of its
// frontends, n.
func manyFrontends(n int) string {
	var b strings.Builder
	b.WriteString("backends: [{name: b, port: 80}]\nfrontends:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: f%d, bind: ':%d', defaultBackend: b}\n", i, 1000+i)
	}
	return b.String()
}

// checkAccepted checks, without Validate's code, what an accepted
// configuration promises the renderer: every number in range, every list
// within its limit, every bind in one spelling (the port in plain decimal,
// an IP address as netip prints it, a host name in lower case, the IPv4
// wildcard as "", "*" or "0.0.0.0") and no two binds of one port on one
// host or on a wildcard.
func checkAccepted(t *testing.T, c *config.Config) {
	t.Helper()
	if c.MaxConn < 0 || c.MaxConn > config.MaxMaxConn {
		t.Fatalf("accepted maxConn %d", c.MaxConn)
	}
	if len(c.Frontends) > config.MaxFrontends || len(c.Backends) > config.MaxBackends {
		t.Fatalf("accepted %d frontends and %d backends", len(c.Frontends), len(c.Backends))
	}
	wildcard := map[string]bool{"": true, "*": true, "0.0.0.0": true, "::": true}
	type bind struct{ host, port string }
	var seen []bind
	for i, f := range c.Frontends {
		host, port, err := net.SplitHostPort(f.Bind)
		if err != nil {
			t.Fatalf("frontends[%d]: accepted bind %q: %v", i, f.Bind, err)
		}
		if n, err := strconv.Atoi(port); err != nil || strconv.Itoa(n) != port {
			t.Fatalf("frontends[%d]: accepted port %q", i, port)
		}
		if ip, err := netip.ParseAddr(host); err == nil && !wildcard[host] {
			if ip.String() != host || ip.Is4In6() || net.JoinHostPort(host, port) != f.Bind {
				t.Fatalf("frontends[%d]: accepted address %q, not as netip prints it", i, f.Bind)
			}
		} else if host != strings.ToLower(host) {
			t.Fatalf("frontends[%d]: accepted host name %q in upper case", i, host)
		}
		for _, s := range seen {
			if s.port == port && (s.host == host || wildcard[s.host] && wildcard[host]) {
				t.Fatalf("frontends[%d]: accepted %q beside %q", i, f.Bind, net.JoinHostPort(s.host, s.port))
			}
		}
		seen = append(seen, bind{host, port})
	}
}
