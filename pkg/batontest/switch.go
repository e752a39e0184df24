package batontest

import (
	"cmp"
	"context"
	"io"
	"net/http"
	"sync"

	"k8s.io/client-go/rest"
)

// switchState is where a Switch stands.
type switchState int

const (
	switchOpen    switchState = iota // requests pass
	switchCut                        // new requests fail with ErrCut
	switchHolding                    // new requests wait, in flight, for Heal
)

// Switch stands between one replica's clients and the API server, as a network
// would. Open, requests pass. Cut, new requests fail at once with ErrCut. Holding,
// new requests are kept in flight: the caller waits (or gives up when its context
// ends), and Heal delivers every held request to the API server, in the order they
// came, whether or not its caller is still waiting, as a network delivers a packet
// already sent. Either way, watches opened before stay open, as a half-broken
// network may leave them.
//
// The zero Switch is open. A Switch is safe for concurrent use.
type Switch struct {
	// mu guards the fields below.
	mu    sync.Mutex
	state switchState
	held  []*heldRequest // in arrival order
}

// heldRequest is one request held in flight.
type heldRequest struct {
	next http.RoundTripper
	req  *http.Request
	// result gets the response once delivered, unless the caller gave up.
	result chan roundTrip

	// mu guards abandoned.
	mu        sync.Mutex
	abandoned bool // the caller stopped waiting
}

type roundTrip struct {
	resp *http.Response
	err  error
}

// Wrap returns a copy of cfg whose requests go through s.
func (s *Switch) Wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) { return s.roundTrip(next, req) })
	})
	return cfg
}

// Cut fails every new request until Heal. Requests held before stay held.
func (s *Switch) Cut() { s.set(switchCut) }

// Hold keeps every new request in flight until Heal.
func (s *Switch) Hold() { s.set(switchHolding) }

func (s *Switch) set(st switchState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = st
}

// Held returns the requests held in flight now, in the order they came, each as its
// method and path, such as "PUT /api/v1/namespaces/a/configmaps/b".
func (s *Switch) Held() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.held))
	for i, h := range s.held {
		out[i] = h.req.Method + " " + cmp.Or(h.req.URL.Path, "/")
	}
	return out
}

// Heal delivers the held requests to the API server, one after the other in the
// order they came, and returns once each was answered; then new requests pass again.
// A request that arrives while Heal delivers is held and delivered after the others.
func (s *Switch) Heal() {
	for {
		s.mu.Lock()
		held := s.held
		s.held = nil
		if len(held) == 0 {
			s.state = switchOpen
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		for _, h := range held {
			h.deliver()
		}
	}
}

func (s *Switch) roundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	switch s.state {
	case switchCut:
		s.mu.Unlock()
		closeBody(req)
		return nil, ErrCut
	case switchOpen:
		s.mu.Unlock()
		return next.RoundTrip(req)
	}
	h := &heldRequest{next: next, req: req, result: make(chan roundTrip, 1)}
	s.held = append(s.held, h)
	s.mu.Unlock()
	select {
	case r := <-h.result:
		return r.resp, r.err
	case <-req.Context().Done():
		h.abandon()
		return nil, req.Context().Err()
	}
}

// deliver sends the held request, detached from its caller's context (the caller
// may have given up: the request is on the wire all the same), and hands the answer
// to the caller, or discards it if the caller gave up.
func (h *heldRequest) deliver() {
	req := h.req.Clone(context.WithoutCancel(h.req.Context()))
	if h.req.GetBody != nil {
		body, err := h.req.GetBody()
		if err != nil {
			h.answer(nil, err)
			return
		}
		req.Body = body
	}
	h.answer(h.next.RoundTrip(req))
}

func (h *heldRequest) answer(resp *http.Response, err error) {
	h.mu.Lock()
	abandoned := h.abandoned
	if !abandoned {
		h.result <- roundTrip{resp, err} // buffered, and sent at most once
	}
	h.mu.Unlock()
	if abandoned && resp != nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

// abandon marks that the caller stopped waiting; an answer already handed over is
// discarded.
func (h *heldRequest) abandon() {
	h.mu.Lock()
	h.abandoned = true
	var r roundTrip
	select {
	case r = <-h.result:
	default:
	}
	h.mu.Unlock()
	if r.resp != nil {
		_ = r.resp.Body.Close()
	}
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// roundTripFunc is a function that is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
