package lifecycle_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/controller/lifecycle"
)

// syncer is an all-replica component that reports Synced once told to.
type syncer struct {
	allReplica
	synced atomic.Bool
}

func (s *syncer) Synced() bool { return s.synced.Load() }

// TestCampaignerWaitsForSyncers: the campaigner starts only once every
// all-replica Syncer synced; with CampaignUnsynced, at once.
func TestCampaignerWaitsForSyncers(t *testing.T) {
	for _, unsynced := range []bool{false, true} {
		t.Run(fmt.Sprintf("CampaignUnsynced=%v", unsynced), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg, pods := &syncer{allReplica: allReplica{name: "config"}}, &syncer{allReplica: allReplica{name: "pods"}}
				elector := &allReplica{name: "elector"}
				h := newHarness(t, lifecycle.Options{CampaignUnsynced: unsynced}, func(h *harness) {
					for _, err := range []error{h.m.AddAllReplica(cfg), h.m.AddAllReplica(pods), h.m.AddCampaigner(elector)} {
						if err != nil {
							t.Fatal(err)
						}
					}
				})
				synctest.Wait()
				if unsynced {
					if elector.started.Load() != 1 || h.m.Status().CampaignWaiting {
						t.Fatal("CampaignUnsynced: the campaigner did not start at once")
					}
					return
				}
				if cfg.started.Load() != 1 || pods.started.Load() != 1 {
					t.Fatal("the syncers did not start")
				}
				time.Sleep(time.Minute)
				synctest.Wait()
				if elector.started.Load() != 0 || !h.m.Status().CampaignWaiting {
					t.Fatal("the campaigner started before any syncer synced")
				}
				if cs := mustStatus(t, h.m.Status(), "elector"); cs.State != lifecycle.StateIdle {
					t.Errorf("elector state %v, want idle", cs.State)
				}
				if h.logs.count("waiting for the all-replica state a leader needs before campaigning", "[config pods]") != 1 {
					t.Errorf("the wait is not logged: %q", h.logs.lines)
				}
				cfg.synced.Store(true)
				time.Sleep(time.Second)
				synctest.Wait()
				if elector.started.Load() != 0 {
					t.Fatal("the campaigner started with one syncer not synced")
				}
				pods.synced.Store(true)
				start := time.Now()
				for elector.started.Load() == 0 {
					time.Sleep(time.Millisecond)
				}
				const syncPoll = 10 * time.Millisecond // the Manager's poll of the Syncers
				if d := time.Since(start); d > syncPoll+time.Millisecond {
					t.Errorf("the campaigner started %v after the last syncer synced, want within %v", d, syncPoll)
				}
				if h.m.Status().CampaignWaiting || h.logs.count("all-replica state synced; campaigning") != 1 {
					t.Error("the start is not reported")
				}
			})
		})
	}
}

// TestCampaignerNeverStartedIsStoppedCleanly: a Manager stopped while its
// campaigner still waits returns, and the campaigner never ran.
func TestCampaignerNeverStartedIsStoppedCleanly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		never := &syncer{allReplica: allReplica{name: "config"}}
		elector := &allReplica{name: "elector"}
		h := newHarness(t, lifecycle.Options{}, func(h *harness) {
			if err := h.m.AddAllReplica(never); err != nil {
				t.Fatal(err)
			}
			if err := h.m.AddCampaigner(elector); err != nil {
				t.Fatal(err)
			}
		})
		time.Sleep(time.Second)
		h.stop()
		if elector.started.Load() != 0 {
			t.Error("the campaigner ran")
		}
	})
}
