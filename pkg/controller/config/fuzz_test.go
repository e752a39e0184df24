package config_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/baton-dev/baton/pkg/controller/config"
)

// FuzzLoad checks Load's contract on any document: it never panics; a
// refused document yields a nil config, an empty version and an error that
// matches ErrInvalid with at least one non-empty reason; an accepted one is
// valid, carries its own Version, survives a round trip through its
// canonical JSON form with the same version, and clones deeply.
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
