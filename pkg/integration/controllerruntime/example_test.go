package controllerruntime_test

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	batoncr "github.com/baton-dev/baton/pkg/integration/controllerruntime"
	"github.com/baton-dev/baton/pkg/termctx"
)

// A fenced client refuses a write made outside any leader term: only the contexts the
// Runtime hands to Reconcile and to leader-only functions carry a term.
func ExampleNewFencedClient() {
	c := batoncr.NewFencedClient(fake.NewClientBuilder().Build())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "x"}}
	err := c.Create(context.Background(), cm)
	fmt.Println(errors.Is(err, batoncr.ErrNoTerm))
	fmt.Println(err)
	_, ok := termctx.FromContext(context.Background())
	fmt.Println("term outside a leader run:", ok)
	// Output:
	// true
	// controllerruntime: write outside a leader term (register the controller with Runtime.AddController, not ctrl.NewControllerManagedBy, and write with the context Reconcile was given)
	// term outside a leader run: false
}
