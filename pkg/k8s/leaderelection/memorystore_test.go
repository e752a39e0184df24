package leaderelection

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"testing/synctest"
)

func TestMemoryStoreCAS(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore("lease")
	if s.String() != "memory/lease" {
		t.Errorf("String = %q", s.String())
	}
	if _, err := s.Get(ctx); !errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("Get on empty store: %v", err)
	}
	if _, err := s.Update(ctx, LeaseRecord{ResourceVersion: "1"}); !errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("Update on empty store: %v", err)
	}
	r1, err := s.Create(ctx, LeaseRecord{HolderIdentity: "a", ResourceVersion: "99"})
	if err != nil || r1.ResourceVersion != "1" || r1.HolderIdentity != "a" {
		t.Fatalf("Create = %+v, %v", r1, err)
	}
	if _, err := s.Create(ctx, LeaseRecord{HolderIdentity: "b"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("second Create: %v", err)
	}
	r2, err := s.Update(ctx, LeaseRecord{HolderIdentity: "b", ResourceVersion: r1.ResourceVersion})
	if err != nil || r2.ResourceVersion != "2" {
		t.Fatalf("Update = %+v, %v", r2, err)
	}
	for _, rv := range []string{r1.ResourceVersion, "", "3"} {
		if _, err := s.Update(ctx, LeaseRecord{HolderIdentity: "c", ResourceVersion: rv}); !errors.Is(err, ErrConflict) {
			t.Fatalf("Update with version %q: %v", rv, err)
		}
	}
	if got, _ := s.Get(ctx); got != r2 {
		t.Fatalf("Get = %+v, want %+v", got, r2)
	}
	s.remove()
	if _, err := s.Get(ctx); !errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	r4, err := s.Create(ctx, LeaseRecord{HolderIdentity: "d"})
	if err != nil || r4.ResourceVersion != "4" { // the delete took version 3
		t.Fatalf("Create after Delete = %+v, %v", r4, err)
	}
	r5 := s.set(LeaseRecord{HolderIdentity: "e", ResourceVersion: "1"})
	if r5.ResourceVersion != "5" || r5.HolderIdentity != "e" {
		t.Fatalf("Set = %+v", r5)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Get(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with cancelled ctx: %v", err)
	}
	if _, err := s.Watch(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch with cancelled ctx: %v", err)
	}
}

func TestMemoryStoreWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		s := NewMemoryStore("lease")
		events, err := s.Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev := <-events; !ev.Deleted {
			t.Fatalf("first event on empty store %+v, want Deleted", ev)
		}
		r1, _ := s.Create(ctx, LeaseRecord{HolderIdentity: "a"})
		if ev := <-events; ev.Deleted || ev.Record != r1 {
			t.Fatalf("event %+v, want %+v", ev, r1)
		}

		// A watcher that does not read never blocks writers and then sees the latest.
		slow, err := s.Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var last LeaseRecord
		for i := range 100 {
			last = s.set(LeaseRecord{HolderIdentity: "a", LeaseTransitions: int32(i)})
		}
		synctest.Wait()
		if ev := <-slow; ev.Record != last {
			t.Fatalf("slow watcher got %+v, want the latest %+v", ev, last)
		}
		select {
		case ev := <-slow:
			t.Fatalf("slow watcher got a second event %+v", ev)
		default:
		}
		if ev := <-events; ev.Record != last {
			t.Fatalf("watcher got %+v, want %+v", ev, last)
		}

		s.remove()
		ev := <-events
		if !ev.Deleted || ev.Record.HolderIdentity != "a" || ev.Record.ResourceVersion != "102" {
			t.Fatalf("delete event %+v, want last record at version 102", ev)
		}
		late, _ := s.Watch(ctx)
		if ev := <-late; !ev.Deleted {
			t.Fatalf("first event after delete %+v", ev)
		}

		cancel()
		synctest.Wait()
		for _, ch := range []<-chan LeaseEvent{events, slow, late} {
			for range ch { // drain what is buffered; the range ends only if closed
			}
		}
		s.set(LeaseRecord{HolderIdentity: "x"}) // no watcher left to notify
		s.mu.Lock()
		n := len(s.watchers)
		s.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d watchers left after their contexts ended", n)
		}
	})
}

// TestMemoryStoreVersionStrings: resourceVersions count up by one per write and go on
// from the restored version after a restore.
func TestMemoryStoreVersionStrings(t *testing.T) {
	s := NewMemoryStore("lease")
	var got []string
	for range 5000 {
		got = append(got, s.set(LeaseRecord{HolderIdentity: "a"}).ResourceVersion)
	}
	s.restore(7, LeaseRecord{HolderIdentity: "b"}, true)
	for range 3 {
		got = append(got, s.set(LeaseRecord{HolderIdentity: "a"}).ResourceVersion)
	}
	for i, v := range got {
		want := uint64(i + 1)
		if i >= 5000 {
			want = uint64(8 + i - 5000)
		}
		if v != strconv.FormatUint(want, 10) {
			t.Fatalf("write %d got resourceVersion %q, want %d", i, v, want)
		}
	}
}
