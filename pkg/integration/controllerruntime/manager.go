package controllerruntime

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// runtimeManager is the manager a Runtime was built on, as Runtime.Manager hands it
// to the builders. Every method is the manager's but Add, which refuses leader-only
// runnables (see Runtime.Manager).
type runtimeManager struct {
	manager.Manager
	rt *Runtime
}

// Manager returns the manager New was given, wrapped for this Runtime: pass it to
// NewControllerManagedBy. A kubebuilder main.go sets mgr = rt.Manager() once, right
// after New, so that every SetupWithManager(mgr) receives it. Its methods are the
// manager's, but Add refuses, with ErrLeaderOnlyRunnable, a runnable the manager
// would run as leader-only work: a controller built with controller-runtime's own
// builder (ctrl.NewControllerManagedBy), a manager.RunnableFunc, or any runnable
// whose NeedLeaderElection is true or which does not say. The manager runs no
// election of its own here, so it would run that work on every replica, outside any
// term, unfenced. All-replica runnables (NeedLeaderElection false), caches, webhook
// and HTTP servers are added as usual. A controller added to the manager New was given
// directly, not through this one, is found once the manager starts it, and Start
// then stops with ErrControllerLeftOnManager.
func (r *Runtime) Manager() manager.Manager { return r.wrapped }

// Add adds run to the manager, or refuses it with ErrLeaderOnlyRunnable when the
// manager would run it as leader-only work.
func (m *runtimeManager) Add(run manager.Runnable) error {
	if leaderOnly(run) {
		return fmt.Errorf("%w: %T: register a controller with controllerruntime.NewControllerManagedBy "+
			"(was ctrl.NewControllerManagedBy) or Runtime.AddController, a function with Runtime.AddLeaderOnly; "+
			"a runnable meant for every replica implements NeedLeaderElection() returning false", ErrLeaderOnlyRunnable, run)
	}
	if err := m.Manager.Add(run); err != nil {
		return err
	}
	census.addedAllReplica(run)
	return nil
}

// hasCache is what the manager runs as a cache (its runnable group of caches).
type hasCache interface {
	GetCache() cache.Cache
}

// leaderOnly reports whether controller-runtime's manager puts run in its group of
// leader-election runnables (manager/runnable_group.go, runnables.Add): what is not an
// HTTP server, a cache or a webhook server and does not say NeedLeaderElection false.
func leaderOnly(run manager.Runnable) bool {
	switch r := run.(type) {
	case *manager.Server:
		return r.NeedLeaderElection()
	case hasCache, webhook.Server:
		return false
	case manager.LeaderElectionRunnable:
		return r.NeedLeaderElection()
	default:
		return true
	}
}
