package node

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines, except the read loop of the suite's
// kept-alive HTTP/2 connection to the API server, which client-go's shared
// transport keeps open for the process's life.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"))
}
