package config_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/baton-dev/baton/pkg/controller/config"
)

// TestValidateLimitsAndCanonicalBinds: every number has a range, each bind
// address one spelling, overlapping binds are refused, and the lists have
// a limit.
func TestValidateLimitsAndCanonicalBinds(t *testing.T) {
	frontends := func(n int) []config.Frontend {
		out := make([]config.Frontend, n)
		for i := range out {
			out[i] = config.Frontend{Name: fmt.Sprintf("f%d", i), Bind: fmt.Sprintf(":%d", 1000+i), DefaultBackend: "web"}
		}
		return out
	}
	backends := func(n int) []config.Backend {
		out := make([]config.Backend, n)
		for i := range out {
			out[i] = config.Backend{Name: fmt.Sprintf("b%d", i), Port: 80, Balance: "roundrobin"}
		}
		out[0].Name, out[1].Name = "web", "api"
		return out
	}
	for _, tc := range []struct {
		name   string
		break_ func(c *config.Config)
		want   []string
	}{
		{"maxConn at its limit", func(c *config.Config) { c.MaxConn = config.MaxMaxConn }, nil},
		{"maxConn above HAProxy's int", func(c *config.Config) { c.MaxConn = 1<<63 - 1 },
			[]string{"maxConn: 9223372036854775807 is above 1000000000, the most HAProxy can size its descriptor table for"}},
		{"maxConn just above", func(c *config.Config) { c.MaxConn = config.MaxMaxConn + 1 },
			[]string{"maxConn: 1000000001 is above 1000000000, the most HAProxy can size its descriptor table for"}},
		{"port with a sign", func(c *config.Config) { c.Frontends[0].Bind = ":+80" },
			[]string{`frontends[0].bind: ":+80": write it as ":80" (ports in plain decimal, IP addresses in their shortest form, host names in lower case)`}},
		{"port with leading zeros", func(c *config.Config) { c.Frontends[0].Bind = ":0000080" },
			[]string{`frontends[0].bind: ":0000080": write it as ":80" (ports in plain decimal, IP addresses in their shortest form, host names in lower case)`}},
		{"IPv6 not in its shortest form", func(c *config.Config) { c.Frontends[0].Bind = "[0:0::1]:80" },
			[]string{`frontends[0].bind: "[0:0::1]:80": write it as "[::1]:80" (ports in plain decimal, IP addresses in their shortest form, host names in lower case)`}},
		{"IPv6 in upper case", func(c *config.Config) { c.Frontends[0].Bind = "[FD00::A]:80" },
			[]string{`frontends[0].bind: "[FD00::A]:80": write it as "[fd00::a]:80" (ports in plain decimal, IP addresses in their shortest form, host names in lower case)`}},
		{"IPv4 in brackets", func(c *config.Config) { c.Frontends[0].Bind = "[10.0.0.1]:80" },
			[]string{`frontends[0].bind: "[10.0.0.1]:80": write it as "10.0.0.1:80" (ports in plain decimal, IP addresses in their shortest form, host names in lower case)`}},
		{"host name in upper case", func(c *config.Config) { c.Frontends[0].Bind = "LB.example.com:80" },
			[]string{`frontends[0].bind: "LB.example.com:80": write it as "lb.example.com:80" (ports in plain decimal, IP addresses in their shortest form, host names in lower case)`}},
		{"IPv4 mapped into IPv6", func(c *config.Config) { c.Frontends[0].Bind = "[::ffff:10.0.0.1]:80" },
			[]string{`frontends[0].bind: host "::ffff:10.0.0.1" is an IPv4 address mapped into IPv6: write the IPv4 address 10.0.0.1`}},
		{"IPv6 wildcard overlaps the IPv4 one", func(c *config.Config) { c.Frontends[1].Bind = "[::]:80" },
			[]string{`frontends[1].bind: address "[::]:80" overlaps ":80" of frontends[0]`}},
		{"IPv4 wildcard overlaps the IPv6 one", func(c *config.Config) {
			c.Frontends[0].Bind = "[::]:80"
			c.Frontends[1].Bind = "0.0.0.0:80"
		}, []string{`frontends[1].bind: address "0.0.0.0:80" overlaps "[::]:80" of frontends[0]`}},
		{"IPv4 address under the IPv4 wildcard", func(c *config.Config) { c.Frontends[1].Bind = "10.0.0.1:80" },
			[]string{`frontends[1].bind: address "10.0.0.1:80" overlaps ":80" of frontends[0]`}},
		{"IPv6 address under the IPv6 wildcard", func(c *config.Config) {
			c.Frontends[0].Bind = "[fd00::1]:443"
			c.Frontends[1].Bind = "[::]:443"
		}, []string{`frontends[1].bind: address "[::]:443" overlaps "[fd00::1]:443" of frontends[0]`}},
		{"host name under a wildcard", func(c *config.Config) { c.Frontends[1].Bind = "lb.example.com:80" },
			[]string{`frontends[1].bind: address "lb.example.com:80" overlaps ":80" of frontends[0]`}},
		{"same IPv6 address twice", func(c *config.Config) {
			c.Frontends[0].Bind = "[::1]:80"
			c.Frontends[1].Bind = "[::1]:80"
		}, []string{`frontends[1].bind: address "[::1]:80" already bound by frontends[0]`}},
		{"IPv6 address beside the IPv4 wildcard", func(c *config.Config) { c.Frontends[1].Bind = "[::1]:80" }, nil},
		{"two addresses on one port", func(c *config.Config) {
			c.Frontends[0].Bind = "10.0.0.1:80"
			c.Frontends[1].Bind = "10.0.0.2:80"
		}, nil},
		{"IPv6 wildcard on another port", func(c *config.Config) { c.Frontends[1].Bind = "[::]:81" }, nil},
		{"frontends at their limit", func(c *config.Config) { c.Frontends = frontends(config.MaxFrontends) }, nil},
		{"too many frontends", func(c *config.Config) { c.Frontends = frontends(20000) },
			[]string{"frontends: 20000 frontends: at most 64 are allowed"}},
		{"backends at their limit", func(c *config.Config) { c.Backends = backends(config.MaxBackends) }, nil},
		{"too many backends", func(c *config.Config) { c.Backends = backends(config.MaxBackends + 1) },
			[]string{"backends: 65 backends: at most 64 are allowed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.break_(c)
			got := config.Reasons(config.Validate(c))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Validate reasons:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestLoadRefusesNonCanonicalPorts: the report's shapes through Load, so
// that YAML's own reading of the value is part of the test.
func TestLoadRefusesNonCanonicalPorts(t *testing.T) {
	for _, bind := range []string{":+80", ":0000080", "[::]:80", "0.0.0.0:80"} {
		doc := fmt.Sprintf("frontends:\n  - {name: a, bind: ':80', defaultBackend: b}\n  - {name: c, bind: '%s', defaultBackend: b}\nbackends:\n  - {name: b, port: 80}\n", bind)
		if _, _, err := config.Load([]byte(doc)); err == nil {
			t.Errorf("Load accepted bind %s beside :80", bind)
		}
	}
}

// TestErrorsQuoteABoundedPrefix: a 1 MiB value appears in no error whole;
// the error says how long it was.
func TestErrorsQuoteABoundedPrefix(t *testing.T) {
	huge := strings.Repeat("x", 1<<20-200)
	for _, tc := range []struct {
		name   string
		break_ func(c *config.Config)
	}{
		{"bind", func(c *config.Config) { c.Frontends[0].Bind = huge }},
		{"bind host", func(c *config.Config) { c.Frontends[0].Bind = huge + ":80" }},
		{"bind port", func(c *config.Config) { c.Frontends[0].Bind = ":" + huge }},
		{"default backend", func(c *config.Config) { c.Frontends[0].DefaultBackend = huge }},
		{"balance", func(c *config.Config) { c.Backends[0].Balance = huge }},
		{"name", func(c *config.Config) { c.Backends[0].Name = huge }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.break_(c)
			err := config.Validate(c)
			if err == nil {
				t.Fatal("Validate accepted the value")
			}
			checkBounded(t, err)
			if tc.name != "name" && !strings.Contains(err.Error(), fmt.Sprintf("(%d bytes)", len(huge))) {
				t.Errorf("error %q does not give the value's length", err)
			}
		})
	}
	t.Run("unknown key", func(t *testing.T) {
		// The YAML decoder takes keys of up to 1024 bytes; the strict
		// decoder quotes an unknown one whole.
		_, _, err := config.Load([]byte("frontends: []\n" + huge[:1000] + ": 1\n"))
		if !errors.Is(err, config.ErrParse) {
			t.Fatalf("Load: %v, want a parse error", err)
		}
		checkBounded(t, err)
	})
	t.Run("document over the limit", func(t *testing.T) {
		doc := []byte(config.DefaultYAML + "#" + strings.Repeat("x", config.MaxDocumentSize))
		_, _, err := config.Load(doc)
		if !errors.Is(err, config.ErrParse) || !strings.Contains(err.Error(), "at most 1048576") {
			t.Fatalf("Load of %d bytes: %v, want a parse error giving the limit", len(doc), err)
		}
	})
	t.Run("many problems", func(t *testing.T) {
		c := base()
		c.Frontends = nil
		for range config.MaxFrontends {
			c.Frontends = append(c.Frontends, config.Frontend{Name: "-" + huge[:40], Bind: huge, DefaultBackend: huge})
		}
		err := config.Validate(c)
		var verr *config.ValidationError
		if !errors.As(err, &verr) {
			t.Fatalf("Validate: %v, want a *ValidationError", err)
		}
		if len(verr.Errors) != config.MaxListedErrors || verr.Omitted != 3*config.MaxFrontends-config.MaxListedErrors {
			t.Fatalf("Validate: %d listed, %d omitted; want %d and %d", len(verr.Errors), verr.Omitted, config.MaxListedErrors, 3*config.MaxFrontends-config.MaxListedErrors)
		}
		reasons := config.Reasons(err)
		if last := reasons[len(reasons)-1]; last != fmt.Sprintf("and %d more problems", verr.Omitted) {
			t.Errorf("last reason %q", last)
		}
		if !strings.HasSuffix(err.Error(), fmt.Sprintf("; and %d more problems", verr.Omitted)) {
			t.Errorf("error does not end with the count of those left out: ...%s", err.Error()[len(err.Error())-60:])
		}
		checkBounded(t, err)
	})
}

// maxReason is the longest reason any document may give; maxError the
// longest message of an error of Load (the listed reasons, "; " between
// them and the package's prefix).
const (
	maxReason = 1024
	maxError  = (config.MaxListedErrors+1)*(maxReason+2) + 64
)

// checkBounded fails t if err's message or one of its reasons is longer
// than the bounds above.
func checkBounded(t *testing.T, err error) {
	t.Helper()
	if n := len(err.Error()); n > maxError {
		t.Errorf("error message of %d bytes, more than %d: %.200s...", n, maxError, err)
	}
	reasons := config.Reasons(err)
	if len(reasons) > config.MaxListedErrors+1 {
		t.Errorf("%d reasons, more than %d", len(reasons), config.MaxListedErrors+1)
	}
	for _, r := range reasons {
		if len(r) > maxReason {
			t.Errorf("reason of %d bytes, more than %d: %.200s...", len(r), maxReason, r)
		}
	}
}

// TestLoadRefusesNumbersNotInPlainDecimal: the decoder reads YAML 1.1,
// where a port written 0120 is octal, 80; every number field must be
// written in plain decimal, or the document is refused naming the field
// and the value the decoder read.
func TestLoadRefusesNumbersNotInPlainDecimal(t *testing.T) {
	const doc = "frontends: [{name: a, bind: ':80', defaultBackend: b}]\nbackends:\n  - {name: b, port: 8080}\n  - {name: c, port: PORT}\nmaxConn: MAXCONN\n"
	load := func(port, maxConn string) error {
		_, _, err := config.Load([]byte(strings.NewReplacer("PORT", port, "MAXCONN", maxConn).Replace(doc)))
		return err
	}
	for _, tc := range []struct{ port, maxConn, want string }{
		{"0120", "100", `backends[1].port: "0120" is not written in plain decimal, and YAML reads it as 80: write the number you mean in decimal`},
		{"+80", "100", `backends[1].port: "+80" is not written in plain decimal, and YAML reads it as 80`},
		{"0x50", "100", `backends[1].port: "0x50" is not written in plain decimal`},
		{"8_0", "100", `backends[1].port: "8_0" is not written in plain decimal`},
		{"80", "0x10", `maxConn: "0x10" is not written in plain decimal, and YAML reads it as 16`},
		{"80", "1e3", `maxConn: "1e3" is not written in plain decimal`},
	} {
		err := load(tc.port, tc.maxConn)
		if !errors.Is(err, config.ErrParse) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("port %s, maxConn %s: %v, want a parse error with %q", tc.port, tc.maxConn, err, tc.want)
		}
	}
	for _, ok := range []struct{ port, maxConn string }{{"80", "0"}, {"65535", "1000000000"}, {"'80'", "100"}} {
		err := load(ok.port, ok.maxConn)
		if ok.port == "'80'" { // a string: refused by the decoder, for its type
			if err == nil || strings.Contains(err.Error(), "plain decimal") {
				t.Errorf("port '80': %v, want the decoder's type error", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("port %s, maxConn %s: %v", ok.port, ok.maxConn, err)
		}
	}
}
