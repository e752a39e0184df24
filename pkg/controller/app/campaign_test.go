package app_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/controller/app"
	"github.com/baton-dev/baton/pkg/controller/configchange"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// silentSource is a configuration source that delivers nothing until its
// gate closes, then the document.
type silentSource struct {
	gate chan struct{}
	raw  []byte
}

func (s silentSource) String() string { return "silent" }

func (s silentSource) Run(ctx context.Context, emit func(configchange.Document)) error {
	select {
	case <-s.gate:
		emit(configchange.Document{Raw: s.raw})
	case <-ctx.Done():
	}
	<-ctx.Done()
	return nil
}

// TestNoCampaignWithoutState is the regression test of a replica that won
// the lease before it had read its configuration: alone in the world, it
// must not take the lease until it has read the configuration and the pods;
// then it campaigns at once and leads.
func TestNoCampaignWithoutState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		src := silentSource{gate: make(chan struct{}), raw: configDoc(2000)}
		a := startNode(t, w, "a", func(o *app.Options) { o.ConfigSource = src })
		time.Sleep(10 * time.Second)
		synctest.Wait()
		st := a.r.Manager().Status()
		if st.Leading || st.Terms != 0 {
			t.Fatalf("a replica that has not read its configuration leads (terms %d)", st.Terms)
		}
		if _, err := w.Leases.Get(context.Background()); !errors.Is(err, k8sle.ErrLeaseNotFound) {
			t.Errorf("lease: %v, want none written", err)
		}
		if cs, _ := st.Component("leader-election"); cs.State != lifecycle.StateIdle || !st.CampaignWaiting {
			t.Errorf("elector %v, campaign waiting %v; want it idle, waiting", cs.State, st.CampaignWaiting)
		}
		if err := a.r.Ready(); err == nil || !strings.Contains(err.Error(), "configuration not read yet") {
			t.Errorf("Ready() = %v", err)
		}
		close(src.gate)
		if l := leaderOf(t, a); l != a {
			t.Fatal("a does not lead once synced")
		}
		if st := a.r.Manager().Status(); st.CampaignWaiting {
			t.Error("still waiting after leading")
		}
	})
}
