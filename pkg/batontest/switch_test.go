package batontest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/baton-dev/baton/pkg/batontest"
)

// server records the bodies it received, in order.
type server struct {
	mu     sync.Mutex
	bodies []string
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, string(b))
	s.mu.Unlock()
	fmt.Fprint(w, "ok "+string(b))
}

func (s *server) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// client returns an HTTP client for srv through sw.
func client(t *testing.T, srv *httptest.Server, sw *batontest.Switch) *http.Client {
	t.Helper()
	cfg := sw.Wrap(&rest.Config{Host: srv.URL})
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: rt}
}

func post(ctx context.Context, c *http.Client, url, body string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestSwitchCutsAndHeals: a cut switch fails requests with ErrCut, and they never
// reach the server; healed, requests pass again.
func TestSwitchCutsAndHeals(t *testing.T) {
	var s server
	srv := httptest.NewServer(&s)
	defer srv.Close()
	var sw batontest.Switch
	c := client(t, srv, &sw)
	defer c.CloseIdleConnections()
	sw.Cut()
	if _, err := post(t.Context(), c, srv.URL, "while cut"); !errors.Is(err, batontest.ErrCut) {
		t.Fatalf("request while cut: %v, want ErrCut", err)
	}
	sw.Heal()
	if got, err := post(t.Context(), c, srv.URL, "healed"); err != nil || got != "ok healed" {
		t.Fatalf("request after Heal: %q, %v", got, err)
	}
	if got := s.received(); len(got) != 1 || got[0] != "healed" {
		t.Fatalf("server received %q, want only the request after Heal", got)
	}
}

// TestSwitchHoldsInFlight: a held request reaches the server only at Heal, in the
// order held, even one whose caller gave up waiting, as a request already on the wire
// does; the caller still waiting gets its answer.
func TestSwitchHoldsInFlight(t *testing.T) {
	var s server
	srv := httptest.NewServer(&s)
	defer srv.Close()
	var sw batontest.Switch
	c := client(t, srv, &sw)
	defer c.CloseIdleConnections()
	sw.Hold()

	gaveUp := make(chan error, 1)
	ctx, cancel := context.WithCancel(t.Context())
	go func() { _, err := post(ctx, c, srv.URL, "first, abandoned"); gaveUp <- err }()
	batontest.WaitFor(t, 10*time.Second, "the first request held", func() bool { return len(sw.Held()) == 1 })
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned request: %v, want context.Canceled", err)
	}

	answer := make(chan string, 1)
	go func() { got, _ := post(t.Context(), c, srv.URL, "second"); answer <- got }()
	batontest.WaitFor(t, 10*time.Second, "the second request held", func() bool { return len(sw.Held()) == 2 })
	if got := s.received(); len(got) != 0 {
		t.Fatalf("server received %q while the switch held", got)
	}
	if held := sw.Held(); held[0] != "POST /" || held[1] != "POST /" {
		t.Fatalf("held %q, want both POSTs", held)
	}
	sw.Heal()
	if got := s.received(); len(got) != 2 || got[0] != "first, abandoned" || got[1] != "second" {
		t.Fatalf("after Heal the server received %q, want both held requests in order", got)
	}
	if got := <-answer; got != "ok second" {
		t.Fatalf("the waiting caller got %q", got)
	}
	if held := sw.Held(); len(held) != 0 {
		t.Fatalf("%q still held after Heal", held)
	}
}

func ExampleSwitch() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") }))
	defer srv.Close()
	var sw batontest.Switch
	rt, _ := rest.TransportFor(sw.Wrap(&rest.Config{Host: srv.URL}))
	c := &http.Client{Transport: rt}
	defer c.CloseIdleConnections()

	sw.Cut()
	_, err := c.Get(srv.URL)
	fmt.Println(errors.Is(err, batontest.ErrCut))
	sw.Heal()
	resp, err := c.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(string(b))
	// Output:
	// true
	// hello
}
