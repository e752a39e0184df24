package controllerruntime

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/baton-dev/baton/pkg/batontest"
)

// shared is the API server of the tests, started in TestMain.
var shared *batontest.Env

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(sharedEnvMain{m}, goleak.IgnoreCurrent(),
		// controller-runtime's and client-go's process-wide workers, started once.
		goleak.IgnoreAnyFunction("k8s.io/client-go/util/workqueue.(*typedDelayingType[...]).waitingLoop"),
		goleak.IgnoreAnyFunction("sigs.k8s.io/controller-runtime/pkg/log.(*loggerPromise).Fulfill"),
	)
}

// sharedEnvMain runs the tests with the shared API server and stops it before goleak
// looks for leaked goroutines.
type sharedEnvMain struct{ m *testing.M }

func (s sharedEnvMain) Run() int {
	env, err := batontest.NewEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	shared = env
	code := s.m.Run()
	if err := env.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
