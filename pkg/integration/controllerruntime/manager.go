package controllerruntime

import (
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// runtimeManager is the manager a Runtime was built on, as Runtime.Manager hands it
// to the builders. Its methods are the manager's.
type runtimeManager struct {
	manager.Manager
	rt *Runtime
}

// Manager returns the manager New was given, wrapped for this Runtime: pass it to
// NewControllerManagedBy. A kubebuilder main.go sets mgr = rt.Manager() once, right
// after New, so that every SetupWithManager(mgr) receives it. Its methods are the
// manager's.
func (r *Runtime) Manager() manager.Manager { return r.wrapped }
