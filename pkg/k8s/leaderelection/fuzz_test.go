package leaderelection

import (
	"errors"
	"testing"
	"time"
)

// FuzzCheckDurations checks CheckDurations against the rules written out
// once more here: it accepts exactly the durations that satisfy them, an
// accepted lease duration survives the trip through the Lease's int32
// seconds unchanged, and every refusal is a *ConfigError naming one of the
// three fields with a reason. NewWithStore agrees with it on every input.
//
//	go test -run '^$' -fuzz FuzzCheckDurations -fuzztime 60s ./pkg/k8s/leaderelection
func FuzzCheckDurations(f *testing.F) {
	for _, d := range [][3]time.Duration{
		{15 * time.Second, 10 * time.Second, 2 * time.Second},
		{time.Second, 130 * time.Millisecond, 100 * time.Millisecond},
		{time.Second, 120 * time.Millisecond, 100 * time.Millisecond},
		{time.Hour, time.Hour - 1, time.Minute},
		{time.Hour + time.Second, time.Second, MinRetryPeriod},
		{1 << 31 * time.Second, 10 * time.Second, 2 * time.Second},
		{3, 2, 1},
		{0, 0, 0},
		{-time.Second, -2, -3},
		{1500 * time.Millisecond, time.Second, 200 * time.Millisecond},
	} {
		f.Add(int64(d[0]), int64(d[1]), int64(d[2]))
	}
	f.Fuzz(func(t *testing.T, ld, rd, rp int64) {
		lease, renew, retry := time.Duration(ld), time.Duration(rd), time.Duration(rp)
		want := lease >= MinLeaseDuration && lease <= MaxLeaseDuration && lease%time.Second == 0 &&
			retry >= MinRetryPeriod && renew > 0 && lease > renew &&
			float64(renew) > 1.2*float64(retry)
		err := CheckDurations(lease, renew, retry)
		if (err == nil) != want {
			t.Fatalf("CheckDurations(%v, %v, %v) = %v, want accepted=%v", lease, renew, retry, err, want)
		}
		if err == nil {
			if got := time.Duration(leaseSeconds(lease)) * time.Second; got != lease {
				t.Fatalf("lease duration %v is stored as %v", lease, got)
			}
		} else {
			checkConfigErrors(t, err)
		}
		_, newErr := NewWithStore(Config{
			Identity: "a", LeaseName: "l", LeaseNamespace: "ns",
			LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry,
		}, NewMemoryStore("l"), Callbacks{}, nil)
		if lease != 0 && renew != 0 && retry != 0 && (newErr == nil) != (err == nil) {
			t.Fatalf("NewWithStore says %v, CheckDurations says %v", newErr, err)
		}
	})
}

func checkConfigErrors(t *testing.T, err error) {
	t.Helper()
	var parts []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		parts = j.Unwrap()
	} else {
		parts = []error{err}
	}
	for _, p := range parts {
		var ce *ConfigError
		if !errors.As(p, &ce) {
			t.Fatalf("%T %v is not a *ConfigError", p, p)
		}
		switch ce.Field {
		case "LeaseDuration", "RenewDeadline", "RetryPeriod":
		default:
			t.Fatalf("error %q names field %q", ce, ce.Field)
		}
		if ce.Reason == "" {
			t.Fatalf("error for %s has no reason", ce.Field)
		}
	}
}
