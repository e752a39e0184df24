package demo

import (
	"context"
	"testing"
	"time"

	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/termctx"
)

// TestTermCutAtItsStartOrderedByItsWrite: a run cut short between a takeover's
// acquiring write and the start of its term (OnTakeover ran, OnStartedLeading did
// not) orders that term by its write's send, after the term before it; the
// recorder used to order it first (no send known), and the demo's checks reported
// two replicas leading at once (TestInterruptedAtRandomMoments, seed 1, under load).
func TestTermCutAtItsStartOrderedByItsWrite(t *testing.T) {
	r := newRecorder(func(string, ...any) {})
	a := &incarnation{replica: "baton-0", n: 1, writes: map[string]time.Time{}}
	b := &incarnation{replica: "baton-1", n: 1, writes: map[string]time.Time{}}
	start := time.Unix(1000, 0)

	r.wrote(a, "1", start)
	ctx, cancel := context.WithCancel(termctx.NewContext(context.Background(), 1))
	r.startedLeading(a, ctx)
	r.stoppedLeading(a)
	cancel()
	r.wrote(b, "13", start.Add(time.Second))
	r.takeover(b, k8sle.LeaseRecord{HolderIdentity: "baton-0", ResourceVersion: "1"},
		k8sle.LeaseRecord{HolderIdentity: "baton-1", ResourceVersion: "13"})

	terms := r.snapshot([]*incarnation{a, b})
	if len(terms) != 2 || terms[0].Term != 1 || terms[1].Term != 13 {
		t.Fatalf("terms in the order %+v, want 1 then 13", terms)
	}
	if got := terms[1].Sent; !got.Equal(start.Add(time.Second)) {
		t.Errorf("term 13 sent at %v, want its acquiring write's send %v", got, start.Add(time.Second))
	}
}
