package sharding_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
)

// TestMemberLeaseDurationIsBounded pins issue 25's defect 5: a leftover member Lease
// with a huge leaseDurationSeconds (10h), never renewed, counts live only for
// leaderelection.MaxLeaseDuration (1h), as the elector bounds a holder's; then its
// share of shards goes to the live replica. The value is counted in Stats.OutOfRange
// once (it is one record).
func TestMemberLeaseDurationIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := shardingtest.NewHistory(testShards)
		stores := sharding.NewMemoryStores(testShards)
		if _, err := stores.Members.Renew(context.Background(), sharding.MemberLease{Identity: "ghost", LeaseDuration: 10 * time.Hour}); err != nil {
			t.Fatal(err)
		}
		a := startReplica(t, stores, "a", h)
		defer a.stop()
		time.Sleep(10 * time.Second)
		if got := a.sharder.Members(); !slices.Equal(got, []string{"a", "ghost"}) {
			t.Fatalf("members at first: %v, want a and ghost (its lease is fresh)", got)
		}
		time.Sleep(leaderelection.MaxLeaseDuration)
		if got := a.sharder.Members(); !slices.Equal(got, []string{"a"}) {
			t.Errorf("members an hour later: %v, want a alone (ghost's 10h lease taken as 1h)", got)
		}
		if got := len(a.sharder.Owned()); got != testShards {
			t.Errorf("a leads %d shards an hour later, want all %d", got, testShards)
		}
		if got := a.sharder.Stats().OutOfRange; got != 1 {
			t.Errorf("Stats().OutOfRange = %d, want 1 (one record out of range)", got)
		}
	})
}
