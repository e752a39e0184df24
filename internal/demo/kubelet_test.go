package demo

import (
	"context"
	"testing"
	"testing/synctest"
)

// TestKubeletProvesOnlyReportedEnds: the simulated kubelet's report proves
// over the incarnation it names and no other (another pod's, the one that
// runs after a restart, one killed while the kubelet stayed silent); a
// report before the watch is found by it, one after a restart is kept as
// the container's last state; the watches end with their context.
func TestKubeletProvesOnlyReportedEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newKubelet(1)
		ctx, cancel := context.WithCancel(context.Background())
		closed := func(ch <-chan struct{}) bool {
			synctest.Wait()
			select {
			case <-ch:
				return true
			default:
				return false
			}
		}
		a1, b1 := k.incarnation("baton-0"), k.incarnation("baton-1")
		if a1.Nonce == b1.Nonce || a1.Validate() != nil || b1.Validate() != nil {
			t.Fatalf("incarnations %v and %v: want valid, with their own nonces", a1, b1)
		}
		k.started(a1)
		k.started(b1)
		deadA1 := k.Dead(ctx, a1.String())
		if closed(deadA1) {
			t.Fatal("a running incarnation proven over")
		}
		k.terminated(b1, 137)
		if closed(deadA1) {
			t.Fatal("another pod's report proved baton-0 over")
		}
		if !closed(k.Dead(ctx, b1.String())) {
			t.Fatal("a watch opened after the report did not find it")
		}
		k.terminated(a1, 137)
		if !closed(deadA1) {
			t.Fatal("the report did not prove baton-0's incarnation over")
		}

		// Restarted: the last state still proves a1 over, not a2.
		a2 := k.incarnation("baton-0")
		k.started(a2)
		deadA2 := k.Dead(ctx, a2.String())
		if !closed(k.Dead(ctx, a1.String())) || closed(deadA2) {
			t.Fatal("after a restart: want the previous incarnation proven over, the running one not")
		}
		// Killed with the kubelet silent, then restarted: nothing proves a2 over.
		a3 := k.incarnation("baton-0")
		k.started(a3)
		if closed(deadA2) || closed(k.Dead(ctx, a3.String())) {
			t.Fatal("a restart the kubelet did not report proved an incarnation over")
		}
		if closed(k.Dead(ctx, "not an incarnation")) {
			t.Fatal("an incarnation that does not parse proven over")
		}
		cancel()
		k.wait() // the watches end with their context
	})
}
