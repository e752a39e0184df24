package app_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/baton-dev/baton/pkg/controller/app"
	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/deploymentscheduler"
)

// lockedBuffer is a bytes.Buffer safe for the concurrent writes of a
// logger.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The reference leader-only components subscribe with a plain
// Subscribe[T]; their subscriptions are leader-only because the replica
// registers them with AddLeaderOnly, and the bus does not warn about them.
// The all-replica subscriptions stay all-replica.
func TestLeaderOnlySubscriptionsByRegistration(t *testing.T) {
	w := newWorld(t)
	logs := &lockedBuffer{}
	n := startNode(t, w, "r1", func(o *app.Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	leaderOf(t, n)

	want := map[string]bool{ // name: leader-only
		configpublisher.Name:     true,
		deploymentscheduler.Name: true,
		"reconciler-coordinator": true,
		"reconciler":             false,
		"lifecycle-manager":      false,
	}
	seen := map[string]bool{}
	for _, st := range n.r.Bus().Stats().Subscribers {
		leaderOnly, ok := want[st.Name]
		if !ok {
			continue
		}
		seen[st.Name] = true
		if st.LeaderOnly != leaderOnly {
			t.Errorf("subscription %q: leader-only %v, want %v", st.Name, st.LeaderOnly, leaderOnly)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("no subscription %q on the leader's bus", name)
		}
	}
	if s := logs.String(); strings.Contains(s, "subscription made after the event bus started") {
		t.Errorf("the bus warned about a late subscription:\n%s", s)
	}
}
