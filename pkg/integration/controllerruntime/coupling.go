package controllerruntime

import (
	"context"
	"fmt"
	"reflect"
	"runtime/debug"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// What the Runtime relies on beyond controller-runtime's public API, and why New
// checks it: docs/design/controllerruntime.md, # Beyond the public API.

// managerType and electionField are where controller-runtime's manager keeps its
// election: manager.New sets the lock exactly when Options.LeaderElection is true.
const (
	managerType   = "*manager.controllerManager"
	electionField = "resourceLock"
)

// builtAgainst is the controller-runtime this package is built and tested against.
const builtAgainst = "v0.25.3"

// controllerRuntimeVersion returns the version of controller-runtime in the
// program's build information, "(version unknown)" without it (a test binary).
func controllerRuntimeVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "sigs.k8s.io/controller-runtime" {
				return d.Version
			}
		}
	}
	return "(version unknown)"
}

// unsupported returns ErrUnsupportedControllerRuntime wrapped with what is missing.
func unsupported(what string) error {
	return fmt.Errorf("%w: sigs.k8s.io/controller-runtime %s: %s; this Baton release is built against %s "+
		"(pin controller-runtime to it, or upgrade Baton)", ErrUnsupportedControllerRuntime, controllerRuntimeVersion(), what, builtAgainst)
}

// checkControllerRuntime checks that the controller-runtime of this program still has
// what the Runtime relies on (see above), and reports whether mgr runs its own election.
func checkControllerRuntime(mgr manager.Manager) (elects bool, err error) {
	probe, err := controller.NewUnmanaged("baton-warmup-probe", controller.Options{
		Reconciler:         reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }),
		SkipNameValidation: ptr.To(true),
	})
	if err != nil {
		return false, fmt.Errorf("controllerruntime: building a controller to check the warm-up: %w", err)
	}
	if err := canWarmUp(probe); err != nil {
		return false, err
	}
	return electsByField(mgr, managerType, electionField)
}

// canWarmUp fails when controller-runtime's controller c has no Warmup method.
func canWarmUp(c any) error {
	if _, ok := c.(warmupper); !ok {
		return unsupported(fmt.Sprintf("its controller %T has no Warmup(ctx) method, by which a follower's informers are synced before it leads", c))
	}
	return nil
}

// electsByField reports whether mgr, a manager of type typeName, has its election
// set in field; it fails when such a manager has no such field. A manager of another
// type (another implementation, or a wrapper) is not recognised and passes.
func electsByField(mgr manager.Manager, typeName, field string) (bool, error) {
	v := reflect.ValueOf(mgr)
	if !v.IsValid() || v.Type().String() != typeName || v.Kind() != reflect.Pointer {
		return false, nil
	}
	lock := v.Elem().FieldByName(field)
	if !lock.IsValid() || lock.Kind() != reflect.Interface {
		return false, unsupported(fmt.Sprintf("its manager has no field %s, by which New tells a manager built with LeaderElection true", field))
	}
	return !lock.IsNil(), nil
}
