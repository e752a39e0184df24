package fence

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestStampsSplitAndCarried(t *testing.T) {
	tok := Token{Holder: "a", Acquired: time.Date(2026, 12, 4, 20, 0, 0, 123456789, time.FixedZone("x", 3600))}
	s := ForTerm(7).WithLease("baton-leader", tok)
	annotations, labels := s.Split()
	want := map[string]string{TermAnnotation: "7", HolderAnnotation: "a", AcquiredAnnotation: "2026-12-04T19:00:00.123456Z"}
	if len(annotations) != len(want) {
		t.Fatalf("annotations %v, want %v", annotations, want)
	}
	for k, v := range want {
		if annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, annotations[k], v)
		}
	}
	if len(labels) != 1 || labels[FenceLabel] != "baton-leader" {
		t.Errorf("labels %v, want only %s=baton-leader", labels, FenceLabel)
	}
	if !s.Tokened() || ForTerm(7).Tokened() {
		t.Error("Tokened: want true with a Lease token only")
	}
	if !s.Carried(annotations, labels) || s.Carried(annotations, nil) {
		t.Error("Carried: want true with every stamp, false without the label")
	}
	if _, labels := ForTerm(1).Split(); labels != nil {
		t.Errorf("a term's stamps alone: labels %v, want none", labels)
	}
	shard := ForTerm(3).WithShardLease("ring-shard-2", tok)
	if shard[ShardLeaseAnnotation] != "ring-shard-2" || shard[ShardFenceLabel] != "ring-shard-2" || shard[ShardHolderAnnotation] != "a" {
		t.Errorf("shard stamps %v", shard)
	}
}

func TestStamped(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		term        uint64
		ok, err     bool
	}{
		{nil, 0, false, false},
		{map[string]string{TermAnnotation: "12"}, 12, true, false},
		{map[string]string{TermAnnotation: "x"}, 0, true, true},
	} {
		term, ok, err := Stamped(tc.annotations)
		if term != tc.term || ok != tc.ok || (err != nil) != tc.err {
			t.Errorf("Stamped(%v) = %d, %v, %v", tc.annotations, term, ok, err)
		}
	}
}

func TestJudge(t *testing.T) {
	ctx := context.Background()
	holds := func(held bool, err error) (HoldsLease, *int) {
		calls := 0
		return func(context.Context) (bool, error) { calls++; return held, err }, &calls
	}
	// Not above the writer's term: passes, the Lease unread.
	h, calls := holds(false, nil)
	if replaced, err := Judge(ctx, "x", 5, 5, h); replaced != 0 || err != nil || *calls != 0 {
		t.Errorf("an equal stamp: %d %v, %d Lease reads", replaced, err, *calls)
	}
	// Above it, the Lease not held: refused.
	if _, err := Judge(ctx, "ConfigMap ns/x", 6, 5, h); !errors.Is(err, ErrStaleTerm) || *calls != 1 {
		t.Errorf("a newer stamp: %v, %d Lease reads; want ErrStaleTerm after one read", err, *calls)
	}
	if _, err := Judge(ctx, "x", 6, 5, nil); !errors.Is(err, ErrStaleTerm) {
		t.Errorf("a newer stamp, no Lease to read: %v, want ErrStaleTerm", err)
	}
	// Held in the writer's term: the stamp is of no term, replaced.
	h, _ = holds(true, nil)
	if replaced, err := Judge(ctx, "x", 9, 5, h); replaced != 9 || err != nil {
		t.Errorf("a stamp of no term: %d %v, want it replaced", replaced, err)
	}
	// The Lease unreadable: its error.
	boom := errors.New("boom")
	h, _ = holds(false, boom)
	if _, err := Judge(ctx, "x", 9, 5, h); !errors.Is(err, boom) {
		t.Errorf("an unreadable Lease: %v, want its error", err)
	}
}
