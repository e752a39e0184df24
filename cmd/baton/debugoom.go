package main

import (
	"context"
	"log/slog"
	"runtime"
	"time"
)

// debugOOMChunk is how much debugOOM allocates at a time.
const debugOOMChunk = 4 << 20

// debugOOM is --debug-oom-after, for tests only: once after has passed (unless ctx
// ended first) it allocates memory without bound, writing every page, so that the
// container's memory limit has the kernel OOM-kill the process. The node
// end-to-end suite (test/node) uses it to see the kubelet report an OOM kill with
// the termination message, and a follower take over. It never returns before ctx
// ends; under no limit it takes the machine's memory, so never set it in
// production.
func debugOOM(ctx context.Context, after time.Duration, logger *slog.Logger) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(after):
	}
	logger.Warn("--debug-oom-after: allocating until the memory limit kills the process")
	var held [][]byte
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		b := make([]byte, debugOOMChunk)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		held = append(held, b)
		select {
		case <-ctx.Done():
			runtime.KeepAlive(held) // every chunk stays allocated until the end
			return
		case <-tick.C:
		}
	}
}
