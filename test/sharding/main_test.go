package sharding

import (
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"
)

func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent(),
		// controller-runtime's and client-go's process-wide workers, started once.
		goleak.IgnoreAnyFunction("k8s.io/client-go/util/workqueue.(*typedDelayingType[...]).waitingLoop"),
		goleak.IgnoreAnyFunction("sigs.k8s.io/controller-runtime/pkg/log.(*loggerPromise).Fulfill"),
	)
}
