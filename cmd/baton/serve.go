package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// serveMetrics serves h on addr, the --metrics-addr of both commands, and
// returns the address it listens on. stop shuts the server down, letting
// requests in flight finish for up to 2s, and returns once it has stopped.
// failed is called, from the server's goroutine, if the server fails after
// it started.
func serveMetrics(addr string, h http.Handler, failed func(error)) (bound net.Addr, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			failed(err)
		}
	}()
	return ln.Addr(), func() {
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		<-done
	}, nil
}
