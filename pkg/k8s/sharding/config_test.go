package sharding_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
)

func TestNewRefusesBadConfig(t *testing.T) {
	stores := sharding.NewMemoryStores(8)
	ok := sharding.Config{Identity: "a", Name: "ring", Namespace: "default", Shards: 8}
	tests := []struct {
		name   string
		change func(*sharding.Config, *sharding.Stores)
		want   string
	}{
		{"identity", func(c *sharding.Config, _ *sharding.Stores) { c.Identity = "" }, "Identity"},
		{"name", func(c *sharding.Config, _ *sharding.Stores) { c.Name = "" }, "Name"},
		{"namespace", func(c *sharding.Config, _ *sharding.Stores) { c.Namespace = "" }, "Namespace"},
		{"shards", func(c *sharding.Config, _ *sharding.Stores) { c.Shards = -3 }, "Shards: -3"},
		{"durations", func(c *sharding.Config, _ *sharding.Stores) { c.RenewDeadline = time.Hour }, "LeaseDuration: lease duration 15s must be greater than renew deadline 1h0m0s"},
		{"settle", func(c *sharding.Config, _ *sharding.Stores) { c.SettleDelay = time.Minute }, "SettleDelay: 1m0s"},
		{"members", func(_ *sharding.Config, s *sharding.Stores) { s.Members = nil }, "Stores.Members"},
		{"shard stores", func(_ *sharding.Config, s *sharding.Stores) { s.Shard = nil }, "Stores.Shard"},
		{"too few shard stores", func(c *sharding.Config, _ *sharding.Stores) { c.Shards = 9 }, "Stores.Shard(8) is nil"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, s := ok, stores
			tc.change(&c, &s)
			_, err := sharding.NewWithStores(c, s, sharding.Callbacks{}, nil)
			if !errors.Is(err, sharding.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want ErrInvalidConfig naming %q", err, tc.want)
			}
		})
	}
	if _, err := sharding.NewWithStores(ok, stores, sharding.Callbacks{}, nil); err != nil {
		t.Fatalf("New with a good config: %v", err)
	}
}

// The electors' warnings about writes the gate held back come at Debug: they are
// expected whenever a shard placed elsewhere is free.
func TestRefusalsLogAtDebug(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		stores := sharding.NewMemoryStores(2)
		h := shardingtest.NewHistory(2)
		// b sees a as a member before it starts: placement gives b one shard, and b's
		// elector for a's shard is refused when it finds the Lease absent.
		if err := stores.Members.Renew(context.Background(), "a", testLease); err != nil {
			t.Fatal(err)
		}
		s, err := sharding.NewWithStores(sharding.Config{Identity: "b", Name: "ring", Namespace: "default", Shards: 2,
			LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry},
			stores, sharding.Callbacks{OnAcquired: h.OnAcquired(t, "b")}, logger)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Run(ctx) }()
		time.Sleep(time.Second)
		cancel()
		<-done
		if s.Stats().Refused == 0 {
			t.Fatalf("no write refused; stats %+v", s.Stats())
		}
		for line := range strings.Lines(buf.String()) {
			if strings.Contains(line, "shard placed on another member") && !strings.Contains(line, "level=DEBUG") {
				t.Errorf("a refusal logged above Debug: %s", line)
			}
		}
		if !strings.Contains(buf.String(), "shard placed on another member") {
			t.Errorf("no refusal logged at all:\n%s", buf.String())
		}
	})
}

// syncBuffer is a bytes.Buffer safe for the loggers of several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
