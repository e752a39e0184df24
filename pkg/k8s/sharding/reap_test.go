package sharding_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
)

// TestCrashedMemberLeaseDeleted: of replicas a, b and c, c crashes (no death signal).
// Once a and b took its shards, one of them deletes c's member Lease, which nobody
// else would: the store then holds a's and b's only. A replica d that starts after
// that counts a, b and itself from its first look on. (Before, c's Lease stayed for
// good, and every replica that started later counted c live for a LeaseDuration after
// its first look, placing shards on it that the others placed elsewhere: on a real
// node, shards of a replica killed twice went without owner for 9.3s.)
func TestCrashedMemberLeaseDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards = 12
		stores := sharding.NewMemoryStores(shards)
		var stops []func()
		defer func() {
			for _, stop := range slices.Backward(stops) {
				stop()
			}
		}()
		run := func(id string, down <-chan struct{}) *sharding.Sharder {
			s, stop := runSharder(t, shardingtest.Cut(stores, down, memberLag), id, shards, nil, sharding.Callbacks{})
			stops = append(stops, stop)
			return s
		}
		crashC := make(chan struct{})
		a := run("a", nil)
		run("b", nil)
		run("c", crashC)
		time.Sleep(2 * testLease)
		close(crashC)
		time.Sleep(3 * testLease)
		if got := memberIDs(t, stores.Members); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("member Leases %v after c crashed, want [a b] (c's deleted)", got)
		}
		if got := a.Members(); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("a counts %v, want [a b]", got)
		}
		d := run("d", nil)
		time.Sleep(testRetry)
		if got := d.Members(); !slices.Equal(got, []string{"a", "b", "d"}) {
			t.Errorf("d counts %v a RetryPeriod after it started, want [a b d]", got)
		}
	})
}

// memberIDs returns the identities of the member Leases in members, sorted.
func memberIDs(t *testing.T, members sharding.MemberStore) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := members.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range (<-events).Members {
		ids = append(ids, m.Identity)
	}
	slices.Sort(ids)
	return ids
}
