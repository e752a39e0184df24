package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestServeMetrics: the handler is served on the address; stop ends the
// server and frees the address; a taken address is refused naming the flag.
func TestServeMetrics(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics") })
	failed := func(err error) { t.Errorf("server failed: %v", err) }
	bound, stop, err := serveMetrics("127.0.0.1:0", h, failed)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + bound.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "metrics" {
		t.Errorf("body %q, want the handler's", body)
	}
	if _, _, err := serveMetrics(bound.String(), h, failed); err == nil || !strings.HasPrefix(err.Error(), "--metrics-addr: ") {
		t.Errorf("serving on a taken address: %v, want an error naming --metrics-addr", err)
	}
	stop()
	ln, err := net.Listen("tcp", bound.String())
	if err != nil {
		t.Fatalf("address still taken after stop: %v", err)
	}
	ln.Close()
}
