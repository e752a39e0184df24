package leaderelection

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/client-go/kubernetes/fake"
)

func TestConfigValidation(t *testing.T) {
	valid := func() Config {
		return Config{Identity: "a", LeaseName: "lease", LeaseNamespace: "ns"}
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
		{"negative lease duration", func(c *Config) { c.LeaseDuration = -time.Second }, []string{"LeaseDuration"}, []string{"lease duration -1s is below the minimum 1s"}},
		{"negative renew deadline", func(c *Config) { c.RenewDeadline = -time.Second }, []string{"RenewDeadline"}, []string{"renew deadline -1s is not positive"}},
		{"negative retry period", func(c *Config) { c.RetryPeriod = -time.Second }, []string{"RetryPeriod"}, []string{"retry period -1s is below the minimum 100ms"}},
		// Defect 5: 2^31 s overflowed leaseDurationSeconds to 1s (two leaders), and
		// nanosecond durations spun the election loop.
		{"lease duration overflowing int32 seconds", func(c *Config) { c.LeaseDuration = (1 << 31) * time.Second },
			[]string{"LeaseDuration"}, []string{"is above the maximum 1h0m0s"}},
		{"lease duration above an hour", func(c *Config) { c.LeaseDuration = time.Hour + time.Second },
			[]string{"LeaseDuration"}, []string{"lease duration 1h0m1s is above the maximum 1h0m0s"}},
		{"lease duration of an hour", func(c *Config) { c.LeaseDuration = time.Hour }, nil, nil},
		{"lease duration not whole seconds", func(c *Config) { c.LeaseDuration = 15500 * time.Millisecond },
			[]string{"LeaseDuration"}, []string{"lease duration 15.5s is not whole seconds"}},
		{"lease duration below a second", func(c *Config) {
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 3*time.Nanosecond, 2*time.Nanosecond, time.Nanosecond
		}, []string{"LeaseDuration", "RetryPeriod"}, []string{"lease duration 3ns is below the minimum 1s", "retry period 1ns is below the minimum 100ms"}},
		{"retry period below the floor", func(c *Config) { c.RetryPeriod = 99 * time.Millisecond },
			[]string{"RetryPeriod"}, []string{"retry period 99ms is below the minimum 100ms"}},
		{"smallest valid", func(c *Config) {
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = time.Second, 121*time.Millisecond, 100*time.Millisecond
		}, nil, nil},
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

// TestSingleReplica: SingleReplica needs only an identity and refuses every election
// field, the lease source included, naming each; the zero Config is an election.
func TestSingleReplica(t *testing.T) {
	single := Config{SingleReplica: true, Identity: "solo"}
	if _, err := New(single, nil, Callbacks{}, nil); err != nil {
		t.Errorf("New(single replica, nil clientset): %v", err)
	}
	if _, err := NewWithStore(single, nil, Callbacks{}, nil); err != nil {
		t.Errorf("NewWithStore(single replica, nil store): %v", err)
	}
	_, err := NewWithStore(Config{SingleReplica: true}, nil, Callbacks{}, nil)
	checkConfigError(t, err, []string{"Identity"}, []string{"identity is empty"})
	full := Config{SingleReplica: true, Identity: "solo", LeaseName: "l", LeaseNamespace: "ns",
		LeaseDuration: time.Minute, RenewDeadline: time.Second, RetryPeriod: time.Second, ReleaseOnCancel: true}
	fields := []string{"LeaseName", "LeaseNamespace", "LeaseDuration", "RenewDeadline", "RetryPeriod", "ReleaseOnCancel"}
	_, err = NewWithStore(full, NewMemoryStore("l"), Callbacks{}, nil)
	checkConfigError(t, err, append(slices.Clone(fields), "store"),
		[]string{"leaseName is set, but SingleReplica runs no election", "store is set, but SingleReplica runs no election"})
	_, err = New(full, fake.NewClientset(), Callbacks{}, nil)
	checkConfigError(t, err, append(slices.Clone(fields), "clientset"), []string{"clientset is set"})
}

// TestZeroConfigElects is the regression test of defect 6: a Config that leaves out the
// election switch must not run without an election. Two candidates on one store with
// lease fields and no other setting: only one leads.
func TestZeroConfigElects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := NewMemoryStore("lease")
		ctx, cancel := context.WithCancel(t.Context())
		var leaders atomic.Int32
		var wg sync.WaitGroup
		for _, id := range []string{"a", "b"} {
			e, err := NewWithStore(Config{Identity: id, LeaseName: "lease", LeaseNamespace: "ns"}, store,
				Callbacks{OnStartedLeading: func(context.Context) { leaders.Add(1) }}, nil)
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { _ = e.Start(ctx) })
		}
		time.Sleep(time.Minute)
		cancel()
		wg.Wait()
		if n := leaders.Load(); n != 1 {
			t.Fatalf("%d terms started among two candidates of the zero Config, want 1", n)
		}
	})
}

func TestNilLeaseSource(t *testing.T) {
	cfg := Config{Identity: "a", LeaseName: "lease", LeaseNamespace: "ns"}
	_, err := New(cfg, nil, Callbacks{}, nil)
	checkConfigError(t, err, []string{"clientset"}, []string{"leaderelection: clientset is nil"})
	_, err = NewWithStore(cfg, nil, Callbacks{}, nil)
	checkConfigError(t, err, []string{"store"}, []string{"leaderelection: store is nil"})
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
	for _, e := range ConfigErrors(err) {
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

// TestCheckDurations: the exported check takes the durations as given (zero is no
// default) and names the Config field of each problem, as New does.
func TestCheckDurations(t *testing.T) {
	err := CheckDurations(0, 0, 0)
	checkConfigError(t, err, []string{"LeaseDuration", "RetryPeriod", "RenewDeadline"},
		[]string{"lease duration 0s is below the minimum 1s", "renew deadline 0s is not positive"})
	err = CheckDurations(DefaultLeaseDuration, DefaultRenewDeadline, 9*time.Second)
	checkConfigError(t, err, []string{"RenewDeadline"}, []string{"renew deadline 10s must be greater than 1.2 × retry period 9s"})
	if err := CheckDurations(DefaultLeaseDuration, DefaultRenewDeadline, DefaultRetryPeriod); err != nil {
		t.Errorf("CheckDurations(defaults) = %v, want nil", err)
	}
}

func TestConfigDeathSignal(t *testing.T) {
	long := Config{Identity: "a", LeaseName: "l", LeaseNamespace: "n", Incarnation: strings.Repeat("x", 1025)}
	var ce *ConfigError
	if err := long.validate("store", true); !errors.As(err, &ce) || ce.Field != "Incarnation" {
		t.Fatalf("validate = %v, want an error naming Incarnation", err)
	}
	single := Config{Identity: "a", SingleReplica: true, Incarnation: "x", DeathWatch: deathWatchFunc(nil)}
	err := single.validate("store", false)
	for _, field := range []string{"Incarnation", "DeathWatch"} {
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(field)) {
			t.Errorf("validate(SingleReplica with %s) = %v, want an error naming it", field, err)
		}
	}
}

type deathWatchFunc func(ctx context.Context, incarnation string) <-chan struct{}

func (f deathWatchFunc) Dead(ctx context.Context, incarnation string) <-chan struct{} {
	return f(ctx, incarnation)
}
