package leaderelection

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
)

func TestConfigValidation(t *testing.T) {
	valid := func() Config {
		return Config{Enabled: true, Identity: "a", LeaseName: "lease", LeaseNamespace: "ns"}
	}
	for _, tc := range []struct {
		name   string
		edit   func(*Config)
		fields []string // ConfigError.Field of each expected error
		texts  []string // each must appear in the message
	}{
		{"valid defaults", func(*Config) {}, nil, nil},
		{"valid custom", func(c *Config) {
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 4*time.Second, 3*time.Second, time.Second
		}, nil, nil},
		{"empty identity", func(c *Config) { c.Identity = "" }, []string{"Identity"}, []string{"leaderelection: identity is empty"}},
		{"empty lease name", func(c *Config) { c.LeaseName = "" }, []string{"LeaseName"}, []string{"lease name is empty"}},
		{"empty lease namespace", func(c *Config) { c.LeaseNamespace = "" }, []string{"LeaseNamespace"}, []string{"lease namespace is empty"}},
		{"negative lease duration", func(c *Config) { c.LeaseDuration = -time.Second }, []string{"LeaseDuration"}, []string{"lease duration is negative"}},
		{"negative renew deadline", func(c *Config) { c.RenewDeadline = -time.Second }, []string{"RenewDeadline"}, []string{"renew deadline is negative"}},
		{"negative retry period", func(c *Config) { c.RetryPeriod = -time.Second }, []string{"RetryPeriod"}, []string{"retry period is negative"}},
		{"lease duration equal to renew deadline", func(c *Config) { c.LeaseDuration = 10 * time.Second },
			[]string{"LeaseDuration"}, []string{"lease duration 10s must be greater than renew deadline 10s"}},
		{"lease duration below default renew deadline", func(c *Config) { c.LeaseDuration = 5 * time.Second },
			[]string{"LeaseDuration"}, []string{"lease duration 5s"}},
		{"renew deadline at 1.2 retry period", func(c *Config) { c.RenewDeadline, c.RetryPeriod = 12*time.Second/10, time.Second },
			[]string{"RenewDeadline"}, []string{"renew deadline 1.2s must be greater than 1.2 × retry period 1s"}},
		{"renew deadline below retry period", func(c *Config) { c.RetryPeriod = 20 * time.Second },
			[]string{"RenewDeadline"}, []string{"renew deadline 10s"}},
		{"several", func(c *Config) { c.Identity, c.LeaseName = "", "" },
			[]string{"Identity", "LeaseName"}, []string{"identity is empty", "lease name is empty"}},
		{"disabled needs no lease", func(c *Config) { c.Enabled, c.LeaseName, c.LeaseNamespace = false, "", "" }, nil, nil},
		{"disabled still needs identity", func(c *Config) { c.Enabled, c.Identity = false, "" }, []string{"Identity"}, []string{"identity is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid()
			tc.edit(&cfg)
			_, err := NewWithStore(cfg, NewMemoryStore("lease"), Callbacks{}, nil)
			checkConfigError(t, err, tc.fields, tc.texts)
			_, err = New(cfg, fake.NewClientset(), Callbacks{}, nil)
			checkConfigError(t, err, tc.fields, tc.texts)
		})
	}
}

func TestNilLeaseSource(t *testing.T) {
	cfg := Config{Enabled: true, Identity: "a", LeaseName: "lease", LeaseNamespace: "ns"}
	_, err := New(cfg, nil, Callbacks{}, nil)
	checkConfigError(t, err, []string{"clientset"}, []string{"leaderelection: clientset is nil"})
	_, err = NewWithStore(cfg, nil, Callbacks{}, nil)
	checkConfigError(t, err, []string{"store"}, []string{"leaderelection: store is nil"})
	cfg.Enabled = false
	if _, err := New(cfg, nil, Callbacks{}, nil); err != nil {
		t.Errorf("disabled New with nil clientset: %v", err)
	}
	if _, err := NewWithStore(cfg, nil, Callbacks{}, nil); err != nil {
		t.Errorf("disabled NewWithStore with nil store: %v", err)
	}
	_, err = NewKubernetesStore(nil, "", "")
	checkConfigError(t, err, []string{"clientset", "LeaseNamespace", "LeaseName"}, nil)
}

func checkConfigError(t *testing.T, err error, fields, texts []string) {
	t.Helper()
	if len(fields) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
	}
	var got []string
	for _, e := range unjoin(err) {
		var ce *ConfigError
		if !errors.As(e, &ce) {
			t.Fatalf("error %v is not a *ConfigError", e)
		}
		if !strings.HasPrefix(ce.Error(), "leaderelection: ") {
			t.Errorf("message %q lacks the package prefix", ce.Error())
		}
		got = append(got, ce.Field)
	}
	if strings.Join(got, ",") != strings.Join(fields, ",") {
		t.Errorf("fields %v, want %v (error %v)", got, fields, err)
	}
	for _, text := range texts {
		if !strings.Contains(err.Error(), text) {
			t.Errorf("error %q does not contain %q", err, text)
		}
	}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
