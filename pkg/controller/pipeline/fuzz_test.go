package pipeline_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/pipeline"
)

// FuzzAcceptedConfigRendersValid checks the promise between config.Load and
// the default pipeline: every configuration Load accepts, with at least one
// ready pod, renders to output the validator finds nothing wrong with (so
// every port and count in plain decimal and in range), renders each bind
// and the maxconn as the configuration has them, and rendering is
// deterministic (the pods' order does not change the output).
// Pods are made from podBytes: up to 16, each with a unique name, an IPv4 or
// IPv6 address and a ready bit, as discovery reports them.
//
//	go test -run '^$' -fuzz FuzzAcceptedConfigRendersValid -fuzztime 60s ./pkg/controller/pipeline
func FuzzAcceptedConfigRendersValid(f *testing.F) {
	f.Add([]byte(config.DefaultYAML), []byte{1, 10, 0, 0, 1})
	f.Add([]byte("frontends:\n  - {name: a, bind: '[::]:443', defaultBackend: b}\n  - {name: c.d, bind: 'localhost:80', defaultBackend: b}\nbackends:\n  - {name: b, port: 65535, balance: leastconn}\n"),
		[]byte{0x81, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 10, 1, 2, 3})
	f.Add([]byte("frontends: [{name: x, bind: '*:1', defaultBackend: y}]\nbackends: [{name: y, port: 1}, {name: z_z, port: 2, balance: source}]\nmaxConn: 1\n"),
		[]byte{1, 127, 0, 0, 1, 0, 8, 8, 8, 8})
	// Edges Load must refuse, or the output would be invalid.
	for _, edge := range []string{
		"frontends: [{name: x, bind: ':80', defaultBackend: y}]\nbackends: [{name: y}]\n",
		"frontends: [{name: x, bind: ':0', defaultBackend: y}]\nbackends: [{name: y, port: 80}]\n",
		"frontends: [{name: x, bind: ':80', defaultBackend: y}, {name: x2, bind: '0:80', defaultBackend: y}]\nbackends: [{name: y, port: 80}]\n",
		"frontends: [{name: 'x y', bind: ':80', defaultBackend: y}]\nbackends: [{name: y, port: 80, balance: random}]\n",
		"frontends: [{name: x, bind: ':80', defaultBackend: z}]\nbackends: [{name: y, port: 80}]\n",
		// Shapes of issue 21.
		"frontends: [{name: x, bind: ':+80', defaultBackend: y}]\nbackends: [{name: y, port: 80}]\n",
		"frontends: [{name: x, bind: ':0000080', defaultBackend: y}]\nbackends: [{name: y, port: 80}]\n",
		"frontends: [{name: x, bind: ':80', defaultBackend: y}, {name: x2, bind: '[::]:80', defaultBackend: y}]\nbackends: [{name: y, port: 80}]\n",
		"frontends: [{name: x, bind: '[0::1]:80', defaultBackend: y}]\nbackends: [{name: y, port: 80}]\n",
		"frontends: [{name: x, bind: ':80', defaultBackend: y}]\nbackends: [{name: y, port: 80}]\nmaxConn: 9223372036854775807\n",
		"frontends: [{name: x, bind: '[::1]:80', defaultBackend: y}, {name: x2, bind: '127.0.0.1:80', defaultBackend: y}]\nbackends: [{name: y, port: 80}]\nmaxConn: 1000000000\n",
	} {
		f.Add([]byte(edge), []byte{1, 10, 0, 0, 1})
	}
	f.Fuzz(func(t *testing.T, raw, podBytes []byte) {
		cfg, version, err := config.Load(raw)
		if err != nil {
			return
		}
		pods := fuzzPods(podBytes)
		ready := 0
		for _, p := range pods {
			if p.Ready {
				ready++
			}
		}
		if ready == 0 {
			pods = append(pods, config.Pod{Namespace: "ns", Name: "always", IP: "10.9.9.9", Ready: true})
		}
		p := pipeline.NewDefault()
		res, err := p.Execute(context.Background(), pipeline.Input{Config: cfg, ConfigVersion: version, Pods: pods})
		if err != nil {
			t.Fatalf("execute: %v", err)
		}
		if !res.Valid() {
			t.Fatalf("accepted config rendered invalid output: %v\nconfig:\n%s\noutput:\n%s", res.Errors, raw, res.Output)
		}
		checkRenderedAsConfigured(t, cfg, res.Output)
		reversed := make([]config.Pod, len(pods))
		for i, pod := range pods {
			reversed[len(pods)-1-i] = pod
		}
		again, err := p.Execute(context.Background(), pipeline.Input{Config: cfg, ConfigVersion: version, Pods: reversed})
		if err != nil || again.Output != res.Output {
			t.Fatalf("pod order changed the output (err %v)", err)
		}
	})
}

// checkRenderedAsConfigured fails t unless output's bind lines are the
// configuration's binds, in order, and its global maxconn is the
// configuration's (or the default) in plain decimal.
func checkRenderedAsConfigured(t *testing.T, cfg *config.Config, output string) {
	t.Helper()
	var binds []string
	maxconn := ""
	for line := range strings.Lines(output) {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "bind":
			binds = append(binds, f[1])
		case len(f) == 2 && f[0] == "maxconn" && maxconn == "":
			maxconn = f[1]
		}
	}
	want := make([]string, len(cfg.Frontends))
	for i, f := range cfg.Frontends {
		want[i] = f.Bind
	}
	if !slices.Equal(binds, want) {
		t.Fatalf("rendered binds %q, configured %q", binds, want)
	}
	if wantMax := strconv.Itoa(cmp.Or(cfg.MaxConn, pipeline.DefaultMaxConn)); maxconn != wantMax {
		t.Fatalf("rendered maxconn %q, want %q", maxconn, wantMax)
	}
}

// fuzzPods turns b into pods: per pod a flag byte (bit 0 ready, bit 7 IPv6)
// and 4 or 16 address bytes.
func fuzzPods(b []byte) []config.Pod {
	var pods []config.Pod
	for len(pods) < 16 && len(b) > 0 {
		flags, n := b[0], 4
		if flags&0x80 != 0 {
			n = 16
		}
		if len(b) < 1+n {
			break
		}
		var addr netip.Addr
		if n == 4 {
			addr = netip.AddrFrom4([4]byte(b[1:5]))
		} else {
			addr = netip.AddrFrom16([16]byte(b[1:17]))
		}
		b = b[1+n:]
		pods = append(pods, config.Pod{
			Namespace: "ns",
			Name:      fmt.Sprintf("pod-%d", len(pods)),
			IP:        addr.String(),
			Ready:     flags&1 != 0,
		})
	}
	return pods
}

// FuzzHAProxyValidator runs the validator, a parser of untrusted text, on
// any input: it never panics, never returns an error, and reports findings
// as LineErrors in line order with lines inside the text, each message
// short whatever the length of the words it quotes.
//
//	go test -run '^$' -fuzz FuzzHAProxyValidator -fuzztime 60s ./pkg/controller/pipeline
func FuzzHAProxyValidator(f *testing.F) {
	out, err := pipeline.NewDefault().Execute(context.Background(), pipeline.Input{
		Config: config.Default(),
		Pods:   []config.Pod{{Name: "a", IP: "10.0.0.1", Ready: true}},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(out.Output)
	f.Add("frontend\nbackend b\n    server s 1.2.3.4:99999\n")
	f.Add("global\n    maxconn x\nlisten l\n    bind :80\n")
	f.Add("backend b\n    balance nope\n    server s [::1]:80 check\n    server s [::1]:81\nfrontend f\n    default_backend zz\n    use_backend b if x\n")
	f.Add("defaults\n    timeout connect 5q\n    mode tcp\n\x00\n")
	f.Add("global\n    maxconn 9223372036854775807\n    nbthread +4\nfrontend f\n    bind :+80\n    bind :0080\n    default_backend b\nbackend b\n    retries 007\n    server s 10.0.0.1:08080\n")
	f.Add("frontend " + strings.Repeat("f", 5000) + "\n    default_backend " + strings.Repeat("\xff", 5000) + "\n")
	f.Fuzz(func(t *testing.T, text string) {
		findings, err := pipeline.HAProxyValidator{}.Validate(context.Background(), text)
		if err != nil {
			t.Fatalf("validator returned an error: %v", err)
		}
		lines := strings.Count(text, "\n") + 1
		last := 0
		for i, f := range findings {
			var le pipeline.LineError
			if !errors.As(f, &le) {
				t.Fatalf("finding %d is %T, not a LineError", i, f)
			}
			if le.Line < 1 || le.Line > lines+1 {
				t.Fatalf("finding %q has line %d, the text has %d", le.Error(), le.Line, lines)
			}
			if le.Line < last {
				t.Fatalf("findings out of order: line %d after %d", le.Line, last)
			}
			if le.Msg == "" {
				t.Fatalf("finding %d at line %d has no message", i, le.Line)
			}
			if len(le.Msg) > maxFinding {
				t.Fatalf("finding %d at line %d has a message of %d bytes, more than %d: %.300s...", i, le.Line, len(le.Msg), maxFinding, le.Msg)
			}
			last = le.Line
		}
	})
}

// maxFinding bounds a finding's message: at most three quoted words of at
// most 64 bytes each (4 bytes each when escaped), and the words around them.
const maxFinding = 1024
