// Package deps holds module requirements in go.mod while the packages that
// use them are written. It is removed once they are.
package deps

import (
	_ "github.com/prometheus/client_golang/prometheus"
	_ "go.uber.org/goleak"
	_ "k8s.io/api/coordination/v1"
	_ "k8s.io/apimachinery/pkg/util/resourceversion"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/tools/leaderelection"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
)
