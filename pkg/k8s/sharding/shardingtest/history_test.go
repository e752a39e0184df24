package shardingtest

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// recordingTB records failures instead of failing the test.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Logf(string, ...any) {}

func TestHistoryFindsTwoOwners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHistory(2)
		h.acquired(sharding.ShardTerm{Shard: 0, Term: 5}, "a")
		time.Sleep(time.Second)
		h.acquired(sharding.ShardTerm{Shard: 0, Term: 7}, "b") // a still leads
		h.acquired(sharding.ShardTerm{Shard: 1, Term: 3}, "a")
		if _, err := h.Balanced("a", "b"); err == nil || !strings.Contains(err.Error(), "shard 0 owned by") {
			t.Errorf("Balanced with two owners of shard 0: %v", err)
		}
		time.Sleep(time.Second)
		h.lost(sharding.ShardTerm{Shard: 0, Term: 5}, "a")
		if count, err := h.Balanced("a", "b"); err != nil || count["a"] != 1 || count["b"] != 1 {
			t.Errorf("Balanced: %v, %v; want a:1 b:1", count, err)
		}
		rec := &recordingTB{TB: t}
		h.CheckNoOverlap(rec)
		if len(rec.errors) != 2 { // the live check at the acquisition, and the spans
			t.Fatalf("CheckNoOverlap reported %q, want the overlap on shard 0 twice", rec.errors)
		}
		rec = &recordingTB{TB: t}
		h.CheckAllEnded(rec)
		if len(rec.errors) != 2 {
			t.Fatalf("CheckAllEnded reported %q, want the open terms of shards 0 and 1", rec.errors)
		}
	})
}

func TestHistoryGaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHistory(1)
		from := time.Now()
		h.acquired(sharding.ShardTerm{Shard: 0, Term: 1}, "a")
		time.Sleep(time.Second)
		h.lost(sharding.ShardTerm{Shard: 0, Term: 1}, "a")
		time.Sleep(300 * time.Millisecond)
		h.acquired(sharding.ShardTerm{Shard: 0, Term: 2}, "b")
		if got := h.CheckGaps(t, "test", from, time.Second); got != 300*time.Millisecond {
			t.Fatalf("longest gap %v, want 300ms", got)
		}
	})
}
