package controllerruntime

import (
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// TestControllerRuntimeCouplingChecked: what New relies on beyond controller-runtime's
// public API is checked, and a controller-runtime without it (simulated: a field
// renamed, a controller without Warmup) fails with ErrUnsupportedControllerRuntime
// naming the version, instead of the check or the warm-up stopping silently.
func TestControllerRuntimeCouplingChecked(t *testing.T) {
	mgr, err := manager.New(shared.Config(), manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	version := controllerRuntimeVersion()
	t.Logf("controller-runtime %s", version)
	if elects, err := checkControllerRuntime(mgr); err != nil || elects {
		t.Fatalf("the pinned controller-runtime: elects %v, %v; want false, nil", elects, err)
	}
	for name, err := range map[string]error{
		"manager field renamed": func() error { _, err := electsByField(mgr, managerType, "leaderElectionLock"); return err }(),
		"no Warmup":             canWarmUp(struct{}{}),
	} {
		if !errors.Is(err, ErrUnsupportedControllerRuntime) || !strings.Contains(err.Error(), "controller-runtime "+version) ||
			!strings.Contains(err.Error(), "built against v0.25.3") {
			t.Errorf("%s: %v, want ErrUnsupportedControllerRuntime naming controller-runtime %s and v0.25.3", name, err, version)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	electing, err := manager.New(shared.Config(), manager.Options{Metrics: metricsserver.Options{BindAddress: "0"},
		LeaderElection: true, LeaderElectionID: "coupling", LeaderElectionNamespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if elects, err := checkControllerRuntime(electing); err != nil || !elects {
		t.Errorf("a manager with LeaderElection true: elects %v, %v; want true, nil", elects, err)
	}
}
