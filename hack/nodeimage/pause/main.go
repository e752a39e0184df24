// Command pause is the one-node cluster's sandbox (pause) image: it holds a pod's
// namespaces open and does nothing until SIGTERM or SIGINT, then exits 0.
// hack/cluster.sh builds it static and tags it as containerd's sandbox_image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
