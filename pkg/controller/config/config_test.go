package config_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"sigs.k8s.io/yaml"

	"github.com/baton-dev/baton/pkg/controller/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const validYAML = `
frontends:
  - name: http
    bind: ":80"
    defaultBackend: web
  - name: admin
    bind: 127.0.0.1:9000
    defaultBackend: api
backends:
  - name: web
    port: 8080
  - name: api
    port: 9090
    balance: leastconn
maxConn: 100
`

func TestLoadValid(t *testing.T) {
	c, version, err := config.Load([]byte(validYAML))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(c.Frontends) != 2 || len(c.Backends) != 2 || c.MaxConn != 100 {
		t.Fatalf("decoded %+v", c)
	}
	if got := c.Backends[0].Balance; got != config.DefaultBalance {
		t.Errorf("defaulted balance = %q, want %q", got, config.DefaultBalance)
	}
	if got := c.Backends[1].Balance; got != "leastconn" {
		t.Errorf("explicit balance = %q, want leastconn", got)
	}
	if len(version) != 16 {
		t.Errorf("version %q: want 16 hex digits", version)
	}
}

func TestVersionIgnoresLayout(t *testing.T) {
	_, v1, err := config.Load([]byte(validYAML))
	if err != nil {
		t.Fatal(err)
	}
	// The same configuration as JSON, keys reordered, the default spelled out.
	js := `{"maxConn":100,"backends":[{"port":8080,"name":"web","balance":"roundrobin"},
	{"name":"api","port":9090,"balance":"leastconn"}],
	"frontends":[{"name":"http","defaultBackend":"web","bind":":80"},{"name":"admin","bind":"127.0.0.1:9000","defaultBackend":"api"}]}`
	_, v2, err := config.Load([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if v1 != v2 {
		t.Errorf("versions differ for equal configurations: %s vs %s", v1, v2)
	}
	_, v3, err := config.Load([]byte(strings.Replace(validYAML, "maxConn: 100", "maxConn: 101", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if v3 == v1 {
		t.Errorf("a changed configuration kept version %s", v1)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"empty", "  \n", "document is empty"},
		{"not yaml", "frontends: [", "yaml"},
		{"unknown field", "frontends: []\nbackends: []\nretries: 3\n", `unknown field "retries"`},
		{"wrong type", "backends:\n  - name: web\n    port: eighty\n", "port"},
		{"duplicate key", "maxConn: 1\nmaxConn: 2\n", "maxConn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := config.Load([]byte(tc.doc))
			if err == nil {
				t.Fatal("Load accepted the document")
			}
			if !errors.Is(err, config.ErrParse) || !errors.Is(err, config.ErrInvalid) {
				t.Errorf("error %v does not match ErrParse and ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "config: ") {
				t.Errorf("error %q: want prefix \"config: \" and %q", err, tc.want)
			}
		})
	}
}

// base returns a valid configuration to break.
func base() *config.Config {
	return &config.Config{
		Frontends: []config.Frontend{
			{Name: "http", Bind: ":80", DefaultBackend: "web"},
			{Name: "tls", Bind: "*:443", DefaultBackend: "api"},
		},
		Backends: []config.Backend{
			{Name: "web", Port: 8080, Balance: "roundrobin"},
			{Name: "api", Port: 9090, Balance: "source"},
		},
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(c *config.Config)
		want   []string
	}{
		{"valid", func(*config.Config) {}, nil},
		{"port too high", func(c *config.Config) { c.Backends[1].Port = 70000 },
			[]string{"backends[1].port: must be between 1 and 65535"}},
		{"port zero", func(c *config.Config) { c.Backends[0].Port = 0 },
			[]string{"backends[0].port: must be between 1 and 65535"}},
		{"unknown backend", func(c *config.Config) { c.Frontends[0].DefaultBackend = "x" },
			[]string{`frontends[0].defaultBackend: unknown backend "x"`}},
		{"empty default backend", func(c *config.Config) { c.Frontends[1].DefaultBackend = "" },
			[]string{"frontends[1].defaultBackend: must not be empty"}},
		{"empty bind", func(c *config.Config) { c.Frontends[1].Bind = "" },
			[]string{"frontends[1].bind: must not be empty"}},
		{"bind without port", func(c *config.Config) { c.Frontends[0].Bind = "80" },
			[]string{`frontends[0].bind: "80" is not host:port or :port`}},
		{"bind bad port", func(c *config.Config) { c.Frontends[0].Bind = ":http" },
			[]string{`frontends[0].bind: port "http" must be a number between 1 and 65535`}},
		{"bind bad host", func(c *config.Config) { c.Frontends[0].Bind = "bad_host!:80" },
			[]string{`frontends[0].bind: host "bad_host!" is not an IP address or host name`}},
		{"same address spelled twice", func(c *config.Config) { c.Frontends[1].Bind = "0.0.0.0:80" },
			[]string{`frontends[1].bind: address "0.0.0.0:80" already bound by frontends[0]`}},
		{"ipv6 and host names", func(c *config.Config) {
			c.Frontends[0].Bind = "[::1]:80"
			c.Frontends[1].Bind = "lb.example.com:80"
		}, nil},
		{"duplicate backend", func(c *config.Config) { c.Backends[1].Name = "web"; c.Frontends[1].DefaultBackend = "web" },
			[]string{`backends[1].name: duplicate name "web" (also backends[0])`}},
		{"duplicate frontend", func(c *config.Config) { c.Frontends[1].Name = "http" },
			[]string{`frontends[1].name: duplicate name "http" (also frontends[0])`}},
		{"empty name", func(c *config.Config) { c.Backends[0].Name = "" },
			[]string{"frontends[0].defaultBackend: unknown backend \"web\"", "backends[0].name: must not be empty"}},
		{"bad name", func(c *config.Config) { c.Frontends[0].Name = "-web" },
			[]string{`frontends[0].name: "-web" must be letters, digits, '.', '_' or '-', starting with a letter or digit`}},
		{"long name", func(c *config.Config) { c.Frontends[0].Name = strings.Repeat("a", 64) },
			[]string{"frontends[0].name: must be at most 63 characters"}},
		{"bad balance", func(c *config.Config) { c.Backends[0].Balance = "random" },
			[]string{`backends[0].balance: "random" is not one of roundrobin, leastconn, source`}},
		{"negative maxConn", func(c *config.Config) { c.MaxConn = -1 },
			[]string{"maxConn: must not be negative"}},
		{"no frontends", func(c *config.Config) { c.Frontends = nil },
			[]string{"frontends: must have at least one frontend"}},
		{"no backends", func(c *config.Config) { c.Backends = nil; c.Frontends = nil },
			[]string{"frontends: must have at least one frontend", "backends: must have at least one backend"}},
		{"several, in document order", func(c *config.Config) {
			c.MaxConn = -5
			c.Backends[1].Port = -1
			c.Frontends[1].Bind = ""
		}, []string{"frontends[1].bind: must not be empty", "backends[1].port: must be between 1 and 65535", "maxConn: must not be negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.break_(c)
			err := config.Validate(c)
			got := config.Reasons(err)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Validate reasons:\n got %q\nwant %q", got, tc.want)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, config.ErrInvalid) || errors.Is(err, config.ErrParse) {
				t.Errorf("%v: want ErrInvalid and not ErrParse", err)
			}
			var fe *config.FieldError
			if !errors.As(err, &fe) || fe.Error() != tc.want[0] {
				t.Errorf("errors.As found %v, want %q", fe, tc.want[0])
			}
			if !strings.HasPrefix(err.Error(), "config: invalid: ") {
				t.Errorf("message %q lacks the package prefix", err)
			}
		})
	}
}

func TestValidateNil(t *testing.T) {
	if got := config.Reasons(config.Validate(nil)); !slices.Equal(got, []string{"config: is nil"}) {
		t.Errorf("Validate(nil) = %q", got)
	}
}

func TestDefaultIsValidAndFresh(t *testing.T) {
	a, b := config.Default(), config.Default()
	if err := config.Validate(a); err != nil {
		t.Fatalf("default invalid: %v", err)
	}
	a.Backends[0].Port = 1
	if b.Backends[0].Port == 1 {
		t.Error("Default returned shared state")
	}
}

func TestClone(t *testing.T) {
	c := base()
	d := c.Clone()
	d.Frontends[0].Name = "changed"
	d.Backends = append(d.Backends, config.Backend{Name: "x"})
	if c.Frontends[0].Name != "http" || len(c.Backends) != 2 {
		t.Errorf("Clone shares memory with the original: %+v", c)
	}
	if config.Version(base().Clone()) != config.Version(base()) {
		t.Error("a clone has another version")
	}
	if (*config.Config)(nil).Clone() != nil {
		t.Error("Clone of nil is not nil")
	}
}

func TestRawVersion(t *testing.T) {
	a, b := config.RawVersion([]byte("x: [")), config.RawVersion([]byte("x: [["))
	if a == b || !strings.HasPrefix(a, "raw-") {
		t.Errorf("RawVersion: %q %q", a, b)
	}
}

func ExampleLoad() {
	_, _, err := config.Load([]byte(`
frontends:
  - name: http
    bind: ":80"
    defaultBackend: web
backends:
  - name: api
    port: 70000
`))
	for _, reason := range config.Reasons(err) {
		fmt.Println(reason)
	}
	// Output:
	// frontends[0].defaultBackend: unknown backend "web"
	// backends[0].port: must be between 1 and 65535
}

func ExampleVersion() {
	a, va, _ := config.Load([]byte(config.DefaultYAML))
	b := a.Clone()
	b.MaxConn++
	fmt.Println(va == config.Version(a), va == config.Version(b))
	// Output: true false
}

// BenchmarkLoad measures the whole Load; BenchmarkBaselineUnmarshal is the
// lenient decode alone, the floor Load builds on.
func BenchmarkLoad(b *testing.B) {
	raw := []byte(validYAML)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := config.Load(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBaselineUnmarshal(b *testing.B) {
	raw := []byte(validYAML)
	b.ReportAllocs()
	for b.Loop() {
		var c config.Config
		if err := yaml.Unmarshal(raw, &c); err != nil {
			b.Fatal(err)
		}
	}
}
