package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestDebugOOMAfterChecked: a negative --debug-oom-after is refused up front,
// naming the flag.
func TestDebugOOMAfterChecked(t *testing.T) {
	code, _, stderr := runCmd(t, "run", "--identity=a", "--debug-oom-after=-1s")
	if want := "baton run: --debug-oom-after -1s"; code != exitUsage || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, exitUsage, want)
	}
}

// TestDebugOOMWaitsAndStops: debugOOM allocates nothing before its delay, and
// returns when its context ends, before the delay or while allocating.
func TestDebugOOMWaitsAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); debugOOM(ctx, time.Hour, slog.New(slog.DiscardHandler)) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("debugOOM returned before its context ended")
		default:
		}
		cancel()
		<-done
	})
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); debugOOM(ctx, time.Second, slog.New(slog.DiscardHandler)) }()
		time.Sleep(time.Second + 20*time.Millisecond) // a few chunks allocated
		cancel()
		<-done
	})
}
