package leaderelection

import (
	"slices"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	r := 0.0
	b := backoff{initial: 100 * time.Millisecond, max: time.Second, factor: 0.2, rand: func() float64 { return r }}
	var got []time.Duration
	for range 6 {
		got = append(got, b.Next())
	}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if !slices.Equal(got, want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
	b.Reset()
	r = 0.999999
	if d := b.Next(); d <= 119*time.Millisecond || d >= 120*time.Millisecond {
		t.Fatalf("jittered initial delay %v, want just under 120ms", d)
	}
	r = 0.5
	if d := b.Next(); d != 220*time.Millisecond {
		t.Fatalf("jittered second delay %v, want 220ms", d)
	}
}
