package controllerruntime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// allReplica is a runnable that says it runs on every replica.
type allReplica struct{}

func (allReplica) Start(context.Context) error { return nil }
func (allReplica) NeedLeaderElection() bool    { return false }

// TestManagerRefusesLeaderOnlyRunnables: Runtime.Manager's Add refuses what the manager
// would run as leader-only work (a controller left on controller-runtime's builder, a
// RunnableFunc), naming the builder to use, and adds an all-replica runnable.
func TestManagerRefusesLeaderOnlyRunnables(t *testing.T) {
	n := newNode(t, "refuse", "manager-refuses")
	mgr := n.rt.Manager()
	err := ctrlbuilder.ControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("left-on-the-manager").Complete(newRequestLog("x"))
	if !errors.Is(err, ErrLeaderOnlyRunnable) || !strings.Contains(err.Error(), "controllerruntime.NewControllerManagedBy") {
		t.Errorf("controller-runtime's builder on rt.Manager(): got %v, want ErrLeaderOnlyRunnable naming controllerruntime.NewControllerManagedBy", err)
	}
	err = mgr.Add(manager.RunnableFunc(func(context.Context) error { return nil }))
	if !errors.Is(err, ErrLeaderOnlyRunnable) || !strings.Contains(err.Error(), "AddLeaderOnly") {
		t.Errorf("RunnableFunc: got %v, want ErrLeaderOnlyRunnable naming AddLeaderOnly", err)
	}
	if err := mgr.Add(allReplica{}); err != nil {
		t.Errorf("all-replica runnable refused: %v", err)
	}
	if err := NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("built-here").Complete(newRequestLog("y")); err != nil {
		t.Errorf("this package's builder on rt.Manager(): %v", err)
	}
}

// TestControllerLeftOnManagerStopsTheRuntime: a controller built with
// controller-runtime's builder on the manager New was given (a half-done migration)
// would run on every replica, unfenced: the manager's Start returns
// ErrControllerLeftOnManager naming it and what to change.
func TestControllerLeftOnManagerStopsTheRuntime(t *testing.T) {
	n := newNode(t, "left", "manager-left")
	err := ctrlbuilder.ControllerManagedBy(n.mgr).For(&corev1.ConfigMap{}).Named("left-on-the-raw-manager").Complete(newRequestLog("x"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err = n.mgr.Start(ctx)
	if !errors.Is(err, ErrControllerLeftOnManager) || !strings.Contains(err.Error(), "left-on-the-raw-manager") ||
		!strings.Contains(err.Error(), "rt.Manager()") {
		t.Fatalf("manager.Start = %v, want ErrControllerLeftOnManager naming the controller and rt.Manager()", err)
	}
}

// TestAllReplicaControllerThroughRuntimeManagerRuns: a controller meant for every
// replica (NeedLeaderElection false), added through rt.Manager(), and the Runtime's
// own leader-only controller both run, and the Runtime does not stop for either.
func TestAllReplicaControllerThroughRuntimeManagerRuns(t *testing.T) {
	n := newNode(t, "all-replica", "manager-all-replica")
	mgr := n.rt.Manager()
	everyone := newRequestLog("every")
	err := ctrlbuilder.ControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("all-replica-controller").
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).Complete(everyone)
	if err != nil {
		t.Fatal(err)
	}
	if err := NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("leader-only-controller").Complete(newRequestLog("leader")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), strayCheckFor+5*time.Second)
	defer cancel()
	if err := n.mgr.Start(ctx); err != nil {
		t.Fatalf("manager.Start = %v, want nil once ctx ended", err)
	}
	if running := runningControllers(); !running["all-replica-controller"] || !running["leader-only-controller"] {
		t.Fatalf("controllers that ran: %v; want both", running)
	}
}
