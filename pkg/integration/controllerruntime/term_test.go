package controllerruntime

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/pkg/fence"
	"github.com/baton-dev/baton/pkg/termctx"
)

// formatMicro formats t as the Lease stores a MicroTime.
func formatMicro(t metav1.MicroTime) string { return fence.FormatAcquired(t.Time) }

// TestLeaderOnlyTermNamesItsLease: the term a leader-only function runs in, as
// termctx.Get gives it, names the Runtime's Lease, and its token is the holder and
// acquireTime the real API server holds on that Lease (as the API server's fence
// compares them), and its Lease UID that Lease's; the fenced client finds that Lease by the term's name.
func TestLeaderOnlyTermNamesItsLease(t *testing.T) {
	n := newNode(t, "a", "termlease")
	got := make(chan termctx.Term, 1)
	err := n.rt.AddLeaderOnly("reader", func(ctx context.Context) error {
		Subscribed(ctx)
		if term, ok := termctx.Get(ctx); ok {
			got <- term
		}
		<-ctx.Done()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n.start(t)
	var term termctx.Term
	select {
	case term = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the leader-only function ran in no term")
	}
	lease, err := shared.Clientset().CoordinationV1().Leases("default").Get(context.Background(), "termlease", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := termctx.Lease{Namespace: "default", Name: "termlease"}
	if term.Lease != want || term.Sharded() || term.Number == 0 {
		t.Errorf("term %+v, want a single leader's term of Lease %v", term, want)
	}
	if term.Token.Holder != "a" || lease.Spec.AcquireTime == nil ||
		formatMicro(metav1.MicroTime{Time: term.Token.Acquired}) != formatMicro(*lease.Spec.AcquireTime) {
		t.Errorf("term token %+v, want the Lease's holder a and acquireTime %v", term.Token, lease.Spec.AcquireTime)
	}
	if term.LeaseUID == "" || term.LeaseUID != string(lease.UID) {
		t.Errorf("term's Lease UID %q, want the Lease's, %q", term.LeaseUID, lease.UID)
	}
	if l := n.rt.leaseOf(term); l != n.rt.lease || l == nil {
		t.Errorf("the fenced client's Lease of the term is %v, want the Runtime's", l)
	}
}
