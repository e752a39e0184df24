package configpublisher_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/fence"
)

// TestWriteStampsTheLeaseToken: a record with a Lease carries that Lease's token of its
// term and the fence's label, for the API server's fence (issue 26: the reference
// controller stamped no token, so the shipped policy protected nothing for baton run).
func TestWriteStampsTheLeaseToken(t *testing.T) {
	s := newMemory(t)
	rec := valid(5, "abc", 3)
	acquired := time.Date(2026, 12, 4, 20, 0, 0, 123456000, time.UTC)
	rec.Lease, rec.Token = "baton-leader", fence.Token{Holder: "replica-1", Acquired: acquired}
	res, err := configpublisher.Write(t.Context(), s, rec)
	if err != nil {
		t.Fatal(err)
	}
	want := fence.ForTerm(5).WithLease("baton-leader", rec.Token)
	if !want.Carried(res.Object.Annotations, res.Object.Labels) {
		t.Errorf("annotations %v, labels %v: want the stamps %v", res.Object.Annotations, res.Object.Labels, want)
	}
	if res.Object.Annotations[fence.AcquiredAnnotation] != "2026-12-04T20:00:00.123456Z" {
		t.Errorf("acquired %q, want the Lease's MicroTime form", res.Object.Annotations[fence.AcquiredAnnotation])
	}
	// The next term's token replaces it.
	next := valid(6, "abc", 3)
	next.Lease, next.Token = "baton-leader", fence.Token{Holder: "replica-2", Acquired: acquired.Add(time.Minute)}
	if res, err = configpublisher.Write(t.Context(), s, next); err != nil {
		t.Fatal(err)
	}
	if res.Object.Annotations[fence.HolderAnnotation] != "replica-2" || res.Object.Annotations[fence.TermAnnotation] != "6" {
		t.Errorf("after the next term's write: %v", res.Object.Annotations)
	}
}

// TestPublisherStampsItsTermsToken: with Options.LeaseToken the publisher reads the
// token once per term and stamps it on every write; a token that says the Lease moved
// on fences the term, and nothing is written.
func TestPublisherStampsItsTermsToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t)
		reads := map[uint64]int{}
		held := map[uint64]bool{4: true}
		r := newReplicaWith(t, configpublisher.Options{Store: mem, LeaseToken: func(ctx context.Context, term uint64) (string, fence.Token, error) {
			reads[term]++
			if !held[term] {
				return "", fence.Token{}, fmt.Errorf("%w: not held", configpublisher.ErrStaleTerm)
			}
			return "baton-leader", fence.Token{Holder: "replica-a", Acquired: time.Unix(int64(term), 0)}, nil
		}})
		r.lead(4)
		r.pods.SetPod(config.Pod{Namespace: "lb", Name: "haproxy-9", IP: "10.0.0.9"})
		synctest.Wait()
		o, err := mem.Get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		want := fence.ForTerm(4).WithLease("baton-leader", fence.Token{Holder: "replica-a", Acquired: time.Unix(4, 0)})
		if !want.Carried(o.Annotations, o.Labels) {
			t.Errorf("term 4's object: %v %v, want the stamps %v", o.Annotations, o.Labels, want)
		}
		if reads[4] != 1 {
			t.Errorf("the token of term 4 read %d times, want once", reads[4])
		}
		r.lose(4)
		writes := mem.Writes()
		r.lead(5)
		r.pods.SetPod(config.Pod{Namespace: "lb", Name: "haproxy-8", IP: "10.0.0.8"})
		synctest.Wait()
		if s := r.pub.State(); !s.Fenced || !strings.Contains(s.LastError, "not held") || mem.Writes() != writes {
			t.Errorf("term 5 without the Lease: state %+v, %d writes, want fenced and nothing written", s, mem.Writes()-writes)
		}
	})
}
