package main

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent(),
		// controller-runtime's and client-go's process-wide workers, started once.
		goleak.IgnoreAnyFunction("k8s.io/client-go/util/workqueue.(*typedDelayingType[...]).waitingLoop"),
		goleak.IgnoreAnyFunction("sigs.k8s.io/controller-runtime/pkg/log.(*loggerPromise).Fulfill"),
	)
}
