package sharding_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
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
		{"empty namespace", func(c *sharding.Config, _ *sharding.Stores) { c.Namespace = "" }, "Namespace"},
		{"shards", func(c *sharding.Config, _ *sharding.Stores) { c.Shards = -3 }, "Shards: -3"},
		{"durations", func(c *sharding.Config, _ *sharding.Stores) { c.RenewDeadline = time.Hour }, "LeaseDuration: lease duration 15s must be greater than renew deadline 1h0m0s"},
		{"settle", func(c *sharding.Config, _ *sharding.Stores) { c.SettleDelay = time.Minute }, "SettleDelay: 1m0s"},
		{"members", func(_ *sharding.Config, s *sharding.Stores) { s.Members = nil }, "Stores.Members"},
		{"shard stores", func(_ *sharding.Config, s *sharding.Stores) { s.Shard = nil }, "Stores.Shard"},
		{"too few shard stores", func(c *sharding.Config, _ *sharding.Stores) { c.Shards = 9 }, "Stores.Shard(8) is nil"},
		// Names the API server would refuse (issue 25, defect 4).
		{"capital name", func(c *sharding.Config, _ *sharding.Stores) { c.Name = "ConfigMapMirror" }, `Name: "ConfigMapMirror" is not valid`},
		{"long name", func(c *sharding.Config, _ *sharding.Stores) { c.Name = strings.Repeat("r", 64) }, "Name: "},
		{"underscore identity", func(c *sharding.Config, _ *sharding.Stores) { c.Identity = "host_0b7c" }, `Identity: "host_0b7c" is not valid`},
		{"long identity", func(c *sharding.Config, _ *sharding.Stores) { c.Identity = strings.Repeat("a", 250) }, "Identity: "},
		{"namespace", func(c *sharding.Config, _ *sharding.Stores) { c.Namespace = "Default" }, `Namespace: "Default" is not valid`},
		// Checked by the shard electors' config, and still ErrInvalidConfig.
		{"incarnation", func(c *sharding.Config, _ *sharding.Stores) { c.Incarnation = strings.Repeat("x", 2000) }, "Incarnation"},
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
