package events_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	busevents "github.com/baton-dev/baton/pkg/events"
)

type req struct{ id string }

func (*req) EventType() string    { return "test.request" }
func (*req) Timestamp() time.Time { return time.Time{} }
func (r *req) RequestID() string  { return r.id }

type resp struct{ id, from string }

func (*resp) EventType() string    { return "test.response" }
func (*resp) Timestamp() time.Time { return time.Time{} }
func (r *resp) RequestID() string  { return r.id }
func (r *resp) Responder() string  { return r.from }

// responder answers every request after delay, unless delay is negative.
func responder(t *testing.T, b *busevents.EventBus, name string, delay time.Duration) {
	ch := busevents.Subscribe[*req](t.Context(), b, name, 8)
	go func() {
		for r := range ch {
			if delay < 0 {
				continue
			}
			time.Sleep(delay)
			b.Publish(&resp{id: r.id, from: name})
			b.Publish(&resp{id: r.id, from: name}) // a duplicate is ignored
		}
	}()
}

func responders(res busevents.RequestResult) []string {
	var out []string
	for _, r := range res.Responses {
		out = append(out, r.Responder())
	}
	return out
}

func TestRequestGathersExpectedResponders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := busevents.NewEventBus(0)
		defer stopAndSettle(b)
		responder(t, b, "fast", time.Millisecond)
		responder(t, b, "slow", 50*time.Millisecond)
		b.Start()
		start := time.Now()
		res, err := b.Request(t.Context(), &req{id: "r1"}, busevents.RequestOptions{
			Timeout: time.Second, ExpectedResponders: []string{"fast", "slow"}, MinResponses: 2,
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := responders(res); !slices.Equal(got, []string{"fast", "slow"}) || len(res.Missing) != 0 {
			t.Fatalf("responses %v missing %v", got, res.Missing)
		}
		if elapsed := time.Since(start); elapsed != 50*time.Millisecond {
			t.Fatalf("returned after %s, want as soon as the last responder answered (50ms)", elapsed)
		}
	})
}

func TestRequestReportsMissingResponders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := busevents.NewEventBus(0)
		defer stopAndSettle(b)
		responder(t, b, "a", time.Millisecond)
		responder(t, b, "mute", -1)
		b.Start()
		start := time.Now()
		res, err := b.Request(t.Context(), &req{id: "r2"}, busevents.RequestOptions{
			Timeout: 100 * time.Millisecond, ExpectedResponders: []string{"a", "mute"}, MinResponses: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(responders(res), []string{"a"}) || !slices.Equal(res.Missing, []string{"mute"}) {
			t.Fatalf("responses %v missing %v", responders(res), res.Missing)
		}
		if elapsed := time.Since(start); elapsed != 100*time.Millisecond {
			t.Fatalf("returned after %s, want the timeout", elapsed)
		}
		res, err = b.Request(t.Context(), &req{id: "r3"}, busevents.RequestOptions{
			Timeout: 100 * time.Millisecond, ExpectedResponders: []string{"a", "mute"}, MinResponses: 2,
		})
		if !errors.Is(err, busevents.ErrTooFewResponses) || len(res.Responses) != 1 {
			t.Fatalf("err %v, %d responses; want ErrTooFewResponses with the one response", err, len(res.Responses))
		}
	})
}

func TestRequestWithoutExpectedRespondersStopsAtMinResponses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := busevents.NewEventBus(0)
		defer stopAndSettle(b)
		responder(t, b, "a", 10*time.Millisecond)
		responder(t, b, "b", 20*time.Millisecond)
		responder(t, b, "c", 30*time.Millisecond)
		b.Start()
		start := time.Now()
		res, err := b.Request(t.Context(), &req{id: "r4"}, busevents.RequestOptions{Timeout: time.Second, MinResponses: 2})
		if err != nil || len(res.Responses) != 2 || time.Since(start) != 20*time.Millisecond {
			t.Fatalf("err %v, responses %v after %s", err, responders(res), time.Since(start))
		}
	})
}

func TestRequestBadInput(t *testing.T) {
	b := busevents.NewEventBus(0)
	defer b.Stop()
	ctx := context.Background()
	if _, err := b.Request(ctx, &req{id: "x"}, busevents.RequestOptions{Timeout: time.Second}); !errors.Is(err, busevents.ErrNotStarted) {
		t.Fatalf("before Start: %v", err)
	}
	b.Start()
	var typedNil *req
	cases := []struct {
		name string
		req  busevents.Request
		opts busevents.RequestOptions
		want error
	}{
		{"nil", nil, busevents.RequestOptions{Timeout: time.Second}, busevents.ErrNilEvent},
		{"typed nil", typedNil, busevents.RequestOptions{Timeout: time.Second}, busevents.ErrNilEvent},
		{"negative timeout", &req{id: "x"}, busevents.RequestOptions{Timeout: -time.Second}, busevents.ErrInvalidRequestOptions},
		{"no timeout, no deadline", &req{id: "x"}, busevents.RequestOptions{}, busevents.ErrInvalidRequestOptions},
		{"negative min", &req{id: "x"}, busevents.RequestOptions{Timeout: time.Second, MinResponses: -1}, busevents.ErrInvalidRequestOptions},
		{"min above expected", &req{id: "x"}, busevents.RequestOptions{Timeout: time.Second, ExpectedResponders: []string{"a"}, MinResponses: 2}, busevents.ErrInvalidRequestOptions},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := b.Request(ctx, c.req, c.opts); !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
		})
	}
}

// stopAndSettle stops the bus and lets the bubble's responders, which may be
// sleeping on fake time, finish.
func stopAndSettle(b *busevents.EventBus) {
	b.Stop()
	time.Sleep(time.Second)
}
