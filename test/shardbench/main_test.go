package shardbench

import (
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"

	"github.com/baton-dev/baton/pkg/batontest"
)

// shared is the API server (without the ShardedListAndWatch gate) of the package's
// tests and benchmarks.
var shared *batontest.Env

func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(envMain{m}, goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("k8s.io/client-go/util/workqueue.(*typedDelayingType[...]).waitingLoop"))
}

type envMain struct{ m *testing.M }

func (e envMain) Run() int {
	env, err := batontest.NewEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	shared = env
	code := e.m.Run()
	if err := env.Close(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return code
}
