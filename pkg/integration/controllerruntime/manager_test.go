package controllerruntime

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
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
