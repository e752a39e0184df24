package deploymentscheduler

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	l := limiter{interval: 2 * time.Second}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if w := l.wait(t0); w != 0 {
		t.Fatalf("first action waits %v", w)
	}
	l.take(t0)
	for _, tc := range []struct {
		at   time.Duration
		want time.Duration
	}{
		{0, 2 * time.Second},
		{500 * time.Millisecond, 1500 * time.Millisecond},
		{2 * time.Second, 0},
		{5 * time.Second, 0},
	} {
		if got := l.wait(t0.Add(tc.at)); got != tc.want {
			t.Errorf("wait at +%v = %v, want %v", tc.at, got, tc.want)
		}
	}
	l.take(t0.Add(3 * time.Second))
	if got := l.wait(t0.Add(4 * time.Second)); got != time.Second {
		t.Errorf("after a second take: wait %v, want 1s", got)
	}
}
