package election

import (
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"

	"github.com/baton-dev/baton/pkg/batontest"
)

// shared is the API server of the tests that do not stop it, started in TestMain.
var shared *batontest.Env

func TestMain(m *testing.M) {
	if os.Getenv(candidateEnv) != "" {
		// A re-executed test binary: be one candidate, then exit.
		klog.SetLogger(logr.Discard())
		os.Exit(candidateMain())
	}
	// client-go's elector logs through klog; the tests log what they need.
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(sharedEnvMain{m}, goleak.IgnoreCurrent())
}

// sharedEnvMain runs the tests with the shared API server, and stops it before
// goleak looks for leaked goroutines (its connections' goroutines end with it).
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
