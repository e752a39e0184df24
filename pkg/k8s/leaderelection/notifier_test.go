package leaderelection

import "testing"

// TestNotifierOrder: OnNewLeader gets every pushed identity once, in the order of
// push, while pushes race deliveries and after close.
func TestNotifierOrder(t *testing.T) {
	var got []string
	n := newNotifier(func(identity string) { got = append(got, identity) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.run()
	}()
	var want []string
	for i := range 1000 {
		identity := string(rune('a' + i%26))
		want = append(want, identity)
		n.push(identity)
	}
	n.close()
	<-done
	if len(got) != len(want) {
		t.Fatalf("delivered %d identities, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delivery %d is %q, want %q", i, got[i], want[i])
		}
	}
}
